//! A connection's stream watched for writes that make no progress: a client that pipelines
//! requests and never reads their answers leaves the server's writes pending, and hyper then
//! neither reads nor times out. `Watched` notes when a write first stayed pending and
//! `Progress::stalled_for` tells how long ago that was, so `serve_connection` closes the
//! connection past `[server] write_timeout_seconds`, as the LDAP side does.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Since when a write has been pending (milliseconds after `start`, plus one; 0: none is).
pub struct Progress {
    start: Instant,
    pending_since: AtomicU64,
}

impl Progress {
    pub fn new() -> Arc<Progress> {
        Arc::new(Progress {
            start: Instant::now(),
            pending_since: AtomicU64::new(0),
        })
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis())
            .unwrap_or(u64::MAX - 1)
            .saturating_add(1)
    }

    fn note<T>(&self, poll: &Poll<T>) {
        if poll.is_pending() {
            let now = self.now();
            let _ =
                self.pending_since
                    .compare_exchange(0, now, Ordering::Relaxed, Ordering::Relaxed);
        } else {
            self.pending_since.store(0, Ordering::Relaxed);
        }
    }

    /// How long the oldest pending write has waited (None: no write is pending).
    pub fn stalled_for(&self) -> Option<Duration> {
        let since = self.pending_since.load(Ordering::Relaxed);
        (since != 0).then(|| Duration::from_millis(self.now().saturating_sub(since)))
    }
}

/// `S` with its writes noted in a `Progress`.
pub struct Watched<S> {
    inner: S,
    progress: Arc<Progress>,
}

impl<S> Watched<S> {
    pub fn new(inner: S, progress: Arc<Progress>) -> Watched<S> {
        Watched { inner, progress }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(context, buffer)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffer: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(context, buffer);
        self.progress.note(&poll);
        poll
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buffers: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(context, buffers);
        self.progress.note(&poll);
        poll
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(context);
        self.progress.note(&poll);
        poll
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_shutdown(context);
        self.progress.note(&poll);
        poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pending_write_is_timed_until_one_completes() {
        let progress = Progress::new();
        assert_eq!(progress.stalled_for(), None);
        progress.note(&Poll::<()>::Pending);
        std::thread::sleep(Duration::from_millis(20));
        // A second pending poll keeps the first one's time.
        progress.note(&Poll::<()>::Pending);
        assert!(progress.stalled_for().unwrap() >= Duration::from_millis(20));
        progress.note(&Poll::Ready(()));
        assert_eq!(progress.stalled_for(), None);
    }
}
