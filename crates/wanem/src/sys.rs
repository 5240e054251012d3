//! Thin, safe wrappers over the Linux calls wanem needs: network namespace
//! switching, TUN attach, signalfd, ppoll, timer slack. All `unsafe` lives here.

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use thiserror::Error;

/// A failed system call, named.
#[derive(Debug, Error)]
pub enum SysError {
    /// Opening our own namespace file failed.
    #[error("open /proc/self/ns/net: {0}")]
    OpenHome(io::Error),
    /// Opening the target namespace file failed.
    #[error("open netns {path}: {source}")]
    OpenNetns {
        /// Namespace path.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// setns into the target namespace failed.
    #[error("setns into {path}: {source}")]
    EnterNetns {
        /// Namespace path.
        path: PathBuf,
        /// Underlying error.
        source: io::Error,
    },
    /// setns back to the original namespace failed.
    #[error("setns back to the original network namespace: {0}")]
    ReturnHome(io::Error),
    /// The device does not exist in the namespace.
    #[error("device {dev} not found in netns {netns} (create it first: ip tuntap add dev {dev} mode tun)")]
    NoDevice {
        /// Device name.
        dev: String,
        /// Namespace path.
        netns: PathBuf,
    },
    /// SIOCGIFMTU failed.
    #[error("SIOCGIFMTU {dev}: {source}")]
    GetMtu {
        /// Device name.
        dev: String,
        /// Underlying error.
        source: io::Error,
    },
    /// Opening /dev/net/tun failed.
    #[error("open /dev/net/tun: {0}")]
    OpenTun(io::Error),
    /// TUNSETIFF failed.
    #[error("TUNSETIFF {dev}: {source}{hint}")]
    SetIff {
        /// Device name.
        dev: String,
        /// Underlying error.
        source: io::Error,
        /// A likely cause.
        hint: &'static str,
    },
    /// Blocking signals or creating the signalfd failed.
    #[error("signalfd: {0}")]
    SignalFd(io::Error),
}

/// An attached TUN device.
#[derive(Debug)]
pub struct Tun {
    /// Non-blocking fd of the attached queue; read and write whole packets.
    pub file: File,
    /// The device's MTU when it was attached.
    pub mtu: u64,
}

fn check(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// The network namespace wanem started in; used to return after attaching.
#[derive(Debug)]
pub struct NetnsHome {
    fd: File,
}

impl NetnsHome {
    /// Remembers the current network namespace.
    ///
    /// # Errors
    /// `/proc/self/ns/net` cannot be opened.
    pub fn open() -> Result<Self, SysError> {
        let fd = File::open("/proc/self/ns/net").map_err(SysError::OpenHome)?;
        Ok(NetnsHome { fd })
    }

    /// Enters `netns`, attaches to TUN device `dev` there, and returns to
    /// the original namespace. Must run before any thread is spawned
    /// (setns changes only the calling thread).
    ///
    /// # Errors
    /// Any failing step; if returning home fails the process is left in the
    /// wrong namespace and the caller must give up.
    pub fn attach_tun(&self, netns: &Path, dev: &str) -> Result<Tun, SysError> {
        let ns = File::open(netns).map_err(|source| SysError::OpenNetns {
            path: netns.to_path_buf(),
            source,
        })?;
        // SAFETY: setns on a valid fd we own; affects only this thread.
        check(unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) }).map_err(|source| {
            SysError::EnterNetns {
                path: netns.to_path_buf(),
                source,
            }
        })?;
        let result = attach_here(netns, dev);
        // SAFETY: as above, with the fd of our original namespace.
        check(unsafe { libc::setns(self.fd.as_raw_fd(), libc::CLONE_NEWNET) })
            .map_err(SysError::ReturnHome)?;
        result
    }
}

fn ifreq_for(dev: &str) -> libc::ifreq {
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in ifr
        .ifr_name
        .iter_mut()
        .zip(dev.bytes().take(libc::IFNAMSIZ - 1))
    {
        *dst = src as libc::c_char;
    }
    ifr
}

fn device_mtu(dev: &str) -> Result<u64, SysError> {
    let err = |source| SysError::GetMtu {
        dev: dev.to_string(),
        source,
    };
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = check(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
        .map_err(err)?;
    // SAFETY: fd is a fresh, valid descriptor that nothing else owns.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut ifr = ifreq_for(dev);
    // SAFETY: SIOCGIFMTU reads the name and writes ifru_mtu of our ifreq.
    check(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFMTU as _, &mut ifr) }).map_err(err)?;
    // SAFETY: the kernel filled ifru_mtu.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    Ok(u64::try_from(mtu).unwrap_or(0))
}

fn attach_here(netns: &Path, dev: &str) -> Result<Tun, SysError> {
    let cname = CString::new(dev).map_err(|_| SysError::NoDevice {
        dev: dev.to_string(),
        netns: netns.to_path_buf(),
    })?;
    // SAFETY: cname is a valid NUL-terminated string.
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        return Err(SysError::NoDevice {
            dev: dev.to_string(),
            netns: netns.to_path_buf(),
        });
    }
    let mtu = device_mtu(dev)?;
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open("/dev/net/tun")
        .map_err(SysError::OpenTun)?;
    let mut ifr = ifreq_for(dev);
    ifr.ifr_ifru.ifru_flags = (libc::IFF_TUN | libc::IFF_NO_PI) as libc::c_short;
    // SAFETY: TUNSETIFF reads our ifreq (name and flags) on our own fd.
    if let Err(source) = check(unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF as _, &mut ifr) }) {
        let hint = match source.raw_os_error() {
            Some(libc::EBUSY) => " (another process is attached to it)",
            Some(libc::EINVAL) => " (is it a TUN device made with `ip tuntap add mode tun`?)",
            Some(libc::EPERM) => " (needs CAP_NET_ADMIN or the device's owner)",
            _ => "",
        };
        return Err(SysError::SetIff {
            dev: dev.to_string(),
            source,
            hint,
        });
    }
    Ok(Tun { file, mtu })
}

/// Asks the kernel for `ns` nanoseconds of timer slack (1 = precise sleeps).
pub fn set_timer_slack(ns: u64) -> io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument.
    check(unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong) }).map(|_| ())
}

/// SIGINT and SIGTERM delivered as a readable fd instead of handlers.
#[derive(Debug)]
pub struct SignalFd {
    fd: File,
}

impl SignalFd {
    /// Blocks SIGINT and SIGTERM for this thread (and threads it spawns)
    /// and returns an fd that becomes readable when one is pending.
    ///
    /// # Errors
    /// sigprocmask or signalfd failed.
    pub fn termination() -> Result<Self, SysError> {
        // SAFETY: sigset_t is plain data; the sig* calls initialize it.
        let fd = unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            if rc != 0 {
                return Err(SysError::SignalFd(io::Error::from_raw_os_error(rc)));
            }
            check(libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC))
                .map_err(SysError::SignalFd)?
        };
        // SAFETY: fd is a fresh descriptor that nothing else owns.
        Ok(SignalFd {
            fd: unsafe { File::from_raw_fd(fd) },
        })
    }

    /// The fd to poll.
    pub fn raw_fd(&self) -> libc::c_int {
        self.fd.as_raw_fd()
    }

    /// The number of a pending signal, if any.
    pub fn take(&self) -> Option<u32> {
        // SAFETY: signalfd_siginfo is plain data.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: reading at most `size` bytes into `info`.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&mut info as *mut libc::signalfd_siginfo).cast(), size) };
        (n == size as isize).then_some(info.ssi_signo)
    }
}

/// ppoll(2) with a relative timeout in nanoseconds (`None` = forever).
/// An interrupted call returns `Ok(0)`.
///
/// # Errors
/// ppoll failed for another reason.
pub fn ppoll(fds: &mut [libc::pollfd], timeout_ns: Option<u64>) -> io::Result<usize> {
    const NS: u64 = 1_000_000_000;
    let ts = timeout_ns.map(|t| {
        let t = t.min(3600 * NS);
        libc::timespec {
            tv_sec: (t / NS) as libc::time_t,
            tv_nsec: (t % NS) as libc::c_long,
        }
    });
    let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: fds is a valid slice; tsp is null or points to a live timespec.
    let rc = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(rc as usize)
}
