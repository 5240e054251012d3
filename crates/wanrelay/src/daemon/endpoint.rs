//! The metrics endpoint: `GET /metrics` over plain HTTP/1.0, one small
//! request per connection.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::debug;

/// Serves `GET /metrics` (and `/`) on `listener` with the text `body()`
/// returns, until the task is dropped. One small request per connection;
/// anything else gets 404, a slow or large request is dropped.
pub async fn serve<F>(listener: TcpListener, body: F)
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let body = Arc::new(body);
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let body = body.clone();
        tokio::spawn(async move {
            if let Err(e) = answer(sock, &*body).await {
                debug!(error = %e, "metrics request failed");
            }
        });
    }
}

async fn answer(
    mut sock: TcpStream,
    body: &(dyn Fn() -> String + Send + Sync),
) -> std::io::Result<()> {
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let read = async {
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && !req.windows(2).any(|w| w == b"\n\n") {
            let n = sock.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            req.extend_from_slice(&buf[..n]);
            if req.len() > 8192 {
                return Err(std::io::Error::other("request too large"));
            }
        }
        Ok(())
    };
    tokio::time::timeout(Duration::from_secs(2), read)
        .await
        .map_err(|_| std::io::Error::other("request timed out"))??;
    let line = req.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, text) = if method == "GET" && (path == "/metrics" || path == "/") {
        ("200 OK", body())
    } else {
        ("404 Not Found", "not found: GET /metrics\n".to_owned())
    };
    let head = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(text.as_bytes()).await?;
    sock.shutdown().await
}
