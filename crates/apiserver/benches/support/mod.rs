//! What the API server's benchmarks share: their runtime, and a plain HTTP/1.1 client
//! connection.

#![allow(dead_code)]

use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A keep-alive HTTP/1.1 connection that sends one request at a time.
pub struct Connection {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    pub async fn open(address: SocketAddr) -> Self {
        let stream = TcpStream::connect(address).await.unwrap();
        stream.set_nodelay(true).unwrap();
        Self {
            stream,
            buffer: Vec::with_capacity(64 * 1024),
        }
    }

    /// Sends a JSON request and returns the status code and the body (Content-Length framed).
    pub async fn request(&mut self, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
        self.send(method, path, "application/json", body).await
    }

    /// Sends a request with a body of `content_type`.
    pub async fn send(
        &mut self,
        method: &str,
        path: &str,
        content_type: &str,
        body: &[u8],
    ) -> (u16, Vec<u8>) {
        // The head and the body in one write, as hyper's client sends a request whose body it
        // has whole: written apart, the server may read the head alone and wait for the body.
        let mut request = format!(
            "{method} {path} HTTP/1.1\r\nHost: bench\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        request.extend_from_slice(body);
        self.stream.write_all(&request).await.unwrap();
        loop {
            if let Some(end) = find(&self.buffer, b"\r\n\r\n") {
                let headers = String::from_utf8_lossy(&self.buffer[..end]).to_ascii_lowercase();
                let code: u16 = headers[9..12].parse().unwrap();
                let length: usize = headers
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length: "))
                    .map(|n| n.trim().parse().unwrap())
                    .unwrap_or(0);
                while self.buffer.len() < end + 4 + length {
                    self.read_more().await;
                }
                let body = self.buffer[end + 4..end + 4 + length].to_vec();
                self.buffer.drain(..end + 4 + length);
                return (code, body);
            }
            self.read_more().await;
        }
    }

    async fn read_more(&mut self) {
        let mut chunk = [0u8; 64 * 1024];
        let n = self.stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "the server closed the connection");
        self.buffer.extend_from_slice(&chunk[..n]);
    }
}

pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The benchmarks' runtime: two worker threads, as the machine the figures come from has two
/// cores, shared by the server and its clients.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
