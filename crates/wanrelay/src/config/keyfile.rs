//! The pre-shared key file (`key_file`): its permissions and its length.

use std::fs;
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use thiserror::Error;
use wanproto::PresharedKey;

use super::Config;

/// The pre-shared key file cannot be used.
#[derive(Debug, Error)]
pub enum KeyFileError {
    /// Not readable.
    #[error("key_file {path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Readable or writable by others than its owner and group.
    #[error("key_file {path}: mode {mode:04o} lets every user read or write the key; run `chmod 600 {path}`")]
    WorldAccessible {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// Too short or too long.
    #[error("key_file {path}: {source}")]
    Key {
        /// The file.
        path: PathBuf,
        /// Why.
        source: wanproto::KeyError,
    },
}

impl Config {
    /// Reads the pre-shared key file: refuses a file that every user may
    /// read or write, warns (returned) if its group may read it; one
    /// trailing newline is stripped.
    ///
    /// # Errors
    /// [`KeyFileError`].
    pub fn load_key(&self) -> Result<(PresharedKey, Option<String>), KeyFileError> {
        let path = &self.key_file;
        let meta = fs::metadata(path).map_err(|source| KeyFileError::Read {
            path: path.clone(),
            source,
        })?;
        let mut warning = None;
        #[cfg(unix)]
        {
            let mode = meta.permissions().mode() & 0o7777;
            if mode & 0o007 != 0 {
                return Err(KeyFileError::WorldAccessible {
                    path: path.clone(),
                    mode,
                });
            }
            if mode & 0o070 != 0 {
                warning = Some(format!(
                    "key_file {}: mode {mode:04o} lets its group read the key; chmod 600 is safer",
                    path.display()
                ));
            }
        }
        #[cfg(not(unix))]
        let _ = meta;
        let mut bytes = fs::read(path).map_err(|source| KeyFileError::Read {
            path: path.clone(),
            source,
        })?;
        if bytes.last() == Some(&b'\n') {
            bytes.pop();
            if bytes.last() == Some(&b'\r') {
                bytes.pop();
            }
        }
        let key = PresharedKey::new(&bytes).map_err(|source| KeyFileError::Key {
            path: path.clone(),
            source,
        })?;
        Ok((key, warning))
    }
}
