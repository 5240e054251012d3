//! Trunk authentication: HMAC-SHA256 challenge-response, both ways.
//!
//! Each side sends a HELLO with a fresh 32-byte nonce, its relay and
//! cluster names and its limits. Once it has the peer's HELLO it sends
//!
//! ```text
//! AUTH = HMAC-SHA256(key, "wanproto trunk v1 auth" || role || H_i || H_a)
//! ```
//!
//! where `role` is the prover's role byte (1 initiator, 2 acceptor) and
//! `H_i`, `H_a` are the complete encoded HELLO frames (header included) of
//! the initiator and of the acceptor. The MAC thus binds both nonces (a
//! recorded AUTH is useless on a new connection), both names and limits
//! (nothing in a HELLO can be changed in flight), and the prover's role (a
//! peer cannot reflect our own AUTH back to us). MACs are compared in
//! constant time by the `hmac` crate.
//!
//! The key only authenticates the handshake: frames after it are neither
//! encrypted nor integrity-protected (a per-frame MAC would cost more CPU
//! than the relays have at WAN line rate). Run trunks over a network you
//! trust against on-path attackers, or inside a tunnel.

use std::fmt;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use thiserror::Error;

use crate::wire::{Role, MAC_LEN};

type HmacSha256 = Hmac<Sha256>;

/// Shortest accepted pre-shared key, in bytes.
pub const MIN_KEY_LEN: usize = 16;
/// Longest accepted pre-shared key, in bytes.
pub const MAX_KEY_LEN: usize = 1024;
const AUTH_LABEL: &[u8] = b"wanproto trunk v1 auth";
const EXPORT_LABEL: &[u8] = b"wanproto trunk v1 export";

/// The pre-shared key of a relay deployment. Its `Debug` output does not
/// show the key.
#[derive(Clone)]
pub struct PresharedKey(Vec<u8>);

/// A key that cannot be used.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum KeyError {
    /// Fewer than [`MIN_KEY_LEN`] bytes.
    #[error("pre-shared key has {0} bytes, at least {MIN_KEY_LEN} are required")]
    TooShort(usize),
    /// More than [`MAX_KEY_LEN`] bytes.
    #[error("pre-shared key has {0} bytes, at most {MAX_KEY_LEN} are allowed")]
    TooLong(usize),
}

impl PresharedKey {
    /// A key from raw bytes (the daemon reads them from a key file and may
    /// strip one trailing newline first).
    ///
    /// # Errors
    /// [`KeyError`] if the key is shorter than [`MIN_KEY_LEN`] or longer
    /// than [`MAX_KEY_LEN`] bytes.
    pub fn new(bytes: &[u8]) -> Result<PresharedKey, KeyError> {
        if bytes.len() < MIN_KEY_LEN {
            return Err(KeyError::TooShort(bytes.len()));
        }
        if bytes.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong(bytes.len()));
        }
        Ok(PresharedKey(bytes.to_vec()))
    }

    fn mac(&self, prover: Role, initiator_hello: &[u8], acceptor_hello: &[u8]) -> HmacSha256 {
        // new_from_slice accepts any key length for HMAC.
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        m.update(AUTH_LABEL);
        m.update(&[prover.code()]);
        m.update(initiator_hello);
        m.update(acceptor_hello);
        m
    }

    /// The AUTH MAC `prover` sends, over the two encoded HELLO frames.
    pub fn auth_mac(
        &self,
        prover: Role,
        initiator_hello: &[u8],
        acceptor_hello: &[u8],
    ) -> [u8; MAC_LEN] {
        let bytes = self
            .mac(prover, initiator_hello, acceptor_hello)
            .finalize()
            .into_bytes();
        let mut out = [0u8; MAC_LEN];
        out.copy_from_slice(&bytes);
        out
    }

    /// A secret derived from the key and an authenticated handshake:
    /// `HMAC-SHA256(key, "wanproto trunk v1 export" || len(label) as u8 ||
    /// label || H_i || H_a)`. Both ends of one trunk connection compute
    /// the same value; a different connection (fresh nonces) or label gives
    /// an unrelated one. `label` is at most 255 bytes (longer is cut).
    pub fn export(&self, label: &[u8], initiator_hello: &[u8], acceptor_hello: &[u8]) -> [u8; 32] {
        let label = &label[..label.len().min(255)];
        let mut m = HmacSha256::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        m.update(EXPORT_LABEL);
        m.update(&[label.len() as u8]);
        m.update(label);
        m.update(initiator_hello);
        m.update(acceptor_hello);
        let mut out = [0u8; 32];
        out.copy_from_slice(&m.finalize().into_bytes());
        out
    }

    /// Whether `mac` is the AUTH MAC `prover` must send (constant time).
    pub fn verify_auth_mac(
        &self,
        prover: Role,
        initiator_hello: &[u8],
        acceptor_hello: &[u8],
        mac: &[u8; MAC_LEN],
    ) -> bool {
        self.mac(prover, initiator_hello, acceptor_hello)
            .verify_slice(mac)
            .is_ok()
    }
}

impl Drop for PresharedKey {
    fn drop(&mut self) {
        // Best effort: overwrite the key before the memory is freed.
        self.0.fill(0);
        std::hint::black_box(&self.0);
    }
}

impl fmt::Debug for PresharedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PresharedKey({} bytes)", self.0.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_length_limits() {
        assert_eq!(
            PresharedKey::new(b"short").unwrap_err(),
            KeyError::TooShort(5)
        );
        assert!(PresharedKey::new(&[1; 16]).is_ok());
        assert_eq!(
            PresharedKey::new(&[1; 1025]).unwrap_err(),
            KeyError::TooLong(1025)
        );
    }

    #[test]
    fn mac_depends_on_role_key_and_transcript() {
        let k = PresharedKey::new(&[1; 32]).unwrap();
        let k2 = PresharedKey::new(&[2; 32]).unwrap();
        let m = k.auth_mac(Role::Initiator, b"hi", b"ha");
        assert!(k.verify_auth_mac(Role::Initiator, b"hi", b"ha", &m));
        assert!(!k.verify_auth_mac(Role::Acceptor, b"hi", b"ha", &m));
        assert!(!k.verify_auth_mac(Role::Initiator, b"hi", b"hb", &m));
        assert!(!k2.verify_auth_mac(Role::Initiator, b"hi", b"ha", &m));
        assert_eq!(format!("{k:?}"), "PresharedKey(32 bytes)");
    }
}
