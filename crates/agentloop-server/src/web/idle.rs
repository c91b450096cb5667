//! The idle timeout: a listener whose connections are closed once no byte has gone either
//! way for a while — a client that connects and sends nothing, stops halfway through its
//! request, or keeps an unused connection open. A stream is never idle that long: its
//! keep-alive comments are writes.

use axum::serve::Listener;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// A TCP listener whose connections time out when idle.
#[derive(Debug)]
pub struct IdleListener {
    inner: TcpListener,
    idle: Duration,
}

impl IdleListener {
    /// `inner`, with connections closed after `idle` without a byte either way.
    pub fn new(inner: TcpListener, idle: Duration) -> Self {
        Self { inner, idle }
    }
}

impl Listener for IdleListener {
    type Io = IdleStream;
    type Addr = std::net::SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        let (stream, addr) = Listener::accept(&mut self.inner).await;
        (IdleStream::new(stream, self.idle), addr)
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection that fails with `TimedOut` once idle (see the [module docs](self)).
#[derive(Debug)]
pub struct IdleStream {
    inner: TcpStream,
    idle: Duration,
    deadline: Pin<Box<Sleep>>,
}

impl IdleStream {
    fn new(inner: TcpStream, idle: Duration) -> Self {
        Self { inner, idle, deadline: Box::pin(tokio::time::sleep(idle)) }
    }

    /// Progress was made: the deadline moves on.
    fn touch(&mut self) {
        let next = Instant::now() + self.idle;
        self.deadline.as_mut().reset(next);
    }

    /// Nothing moved: fails once the deadline has passed (and wakes then, if not yet).
    fn check(&mut self, cx: &mut Context<'_>) -> Poll<io::Error> {
        match self.deadline.as_mut().poll(cx) {
            Poll::Ready(()) => {
                Poll::Ready(io::Error::new(io::ErrorKind::TimedOut, "idle connection"))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncRead for IdleStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(result) => {
                this.touch();
                Poll::Ready(result)
            }
            Poll::Pending => this.check(cx).map(Err),
        }
    }
}

impl AsyncWrite for IdleStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write(cx, buf) {
            Poll::Ready(result) => {
                this.touch();
                Poll::Ready(result)
            }
            Poll::Pending => this.check(cx).map(Err),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(result) => {
                this.touch();
                Poll::Ready(result)
            }
            Poll::Pending => this.check(cx).map(Err),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}
