//! Socket options of trunk sockets: retransmission through WAN outages.
//!
//! Linux backs TCP's retransmission timer off to 120 s, so after a cut of
//! 30 s a trunk would wait up to a minute more before its next try. Trunk
//! sockets cap it at 1 s (`TCP_RTO_MAX_MS`, Linux 6.15 and later; an older
//! kernel keeps its backoff and a long cut is then covered by session
//! resumption on a new socket), as libwanshim does for direct WAN
//! connections (docs/libwanshim.md).

use std::os::fd::AsRawFd;

use tokio::net::TcpStream;
use tracing::debug;

/// `TCP_RTO_MAX_MS` (include/uapi/linux/tcp.h).
const TCP_RTO_MAX_MS: libc::c_int = 44;
/// The cap: the kernel's lowest allowed value.
const RTO_MAX_MS: libc::c_int = 1000;

/// Caps `sock`'s retransmission backoff at 1 s where the kernel can.
pub fn wan_retransmission(sock: &TcpStream) {
    let v: libc::c_int = RTO_MAX_MS;
    // SAFETY: a valid socket descriptor, a c_int option of its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::IPPROTO_TCP,
            TCP_RTO_MAX_MS,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        debug!(error = %std::io::Error::last_os_error(), "TCP_RTO_MAX_MS not set on a trunk socket");
    }
}
