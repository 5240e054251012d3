//! The last reply to a shim connection (a refusal with its reason, or ok
//! to a kind-4 request), then a graceful close.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use wanproto::{Reason, Reply};

/// Writes a refusal reply and closes gracefully: the bytes the shim sent
/// (the preamble, early data) are drained first, for a close with unread
/// input would send an RST that can overtake the reply.
pub async fn send_refusal(sock: &mut TcpStream, reason: Reason) {
    send_last_reply(sock, Reply::Refused(reason)).await;
}

/// Writes the last reply of a connection and closes it gracefully (as
/// [`send_refusal`]).
pub async fn send_last_reply(sock: &mut TcpStream, reply: Reply) {
    let write = async {
        sock.write_all(&reply.encode()).await?;
        sock.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left = 256 * 1024usize;
        while left > 0 {
            let n = sock.read(&mut sink).await?;
            if n == 0 {
                break;
            }
            left = left.saturating_sub(n);
        }
        Ok::<(), std::io::Error>(())
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}
