//! The byte stream a connection or a replication link runs on. A leaf.

use tokio::io::{AsyncRead, AsyncWrite};

/// Any byte stream a connection runs on: TCP, TLS over TCP, or a unix socket.
pub trait ByteStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> ByteStream for T {}
pub type BoxedStream = Box<dyn ByteStream>;
