//! Frames on a byte stream, in one place: a frame is written as its head then its bulk data,
//! and read as its length prefix, checked against a bound before anything is allocated, then
//! exactly that many bytes, decoded.
//!
//! - blocking ([`write_frame_blocking`], [`read_frame_blocking`]): for tests, the soak suite,
//!   examples and tools that speak raw frames on a `TcpStream` or `UnixStream`;
//! - async, behind the `tokio` feature (`write_frame`, `read_frame`): the client's
//!   connections and the server's answers. The server reads requests with its own reader, which
//!   takes its byte budget a step ahead of the bytes (`iosets-server`'s `conn.rs`).

use std::io::{self, Read, Write};

use bytes::Bytes;

use crate::{decode, frame_len, Encoded, Frame, ProtoError};

/// The capacity of the buffered writers `write_frame` writes into (the client's and the
/// server's): bulk data this large or larger bypasses the buffer.
pub const WRITE_BUFFER: usize = 64 * 1024;

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The stream ended before a frame began (the peer closed the connection).
    #[error("closed")]
    Closed,
    /// The stream ended in the middle of a frame.
    #[error("closed in the middle of a frame")]
    Truncated,
    /// Reading failed.
    #[error("read failed: {0}")]
    Io(io::Error),
    /// The bytes are not a frame: a length out of bounds, or a body that does not decode.
    #[error("protocol error: {0}")]
    Protocol(ProtoError),
}

impl ReadError {
    fn of_prefix(e: io::Error) -> ReadError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::Closed
        } else {
            ReadError::Io(e)
        }
    }

    fn of_body(e: io::Error) -> ReadError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ReadError::Truncated
        } else {
            ReadError::Io(e)
        }
    }
}

impl From<ReadError> for io::Error {
    /// An end of stream is `UnexpectedEof`, bytes that are not a frame `InvalidData`.
    fn from(e: ReadError) -> io::Error {
        match e {
            ReadError::Io(e) => e,
            ReadError::Closed | ReadError::Truncated => {
                io::Error::new(io::ErrorKind::UnexpectedEof, e.to_string())
            }
            ReadError::Protocol(_) => io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
        }
    }
}

/// Writes one frame: its head, then its bulk data.
pub fn write_frame_blocking(w: &mut impl Write, frame: &Encoded) -> io::Result<()> {
    w.write_all(&frame.head)?;
    if !frame.data.is_empty() {
        w.write_all(&frame.data)?;
    }
    Ok(())
}

/// Reads one frame of at most `max` bytes (its length prefix is checked before the body is
/// allocated) and decodes it.
pub fn read_frame_blocking(r: &mut impl Read, max: u32) -> Result<Frame, ReadError> {
    let mut prefix = [0u8; 4];
    r.read_exact(&mut prefix).map_err(ReadError::of_prefix)?;
    let len = frame_len(prefix, max).map_err(ReadError::Protocol)?;
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).map_err(ReadError::of_body)?;
    decode(Bytes::from(body)).map_err(ReadError::Protocol)
}

#[cfg(feature = "tokio")]
mod nonblocking {
    use bytes::BytesMut;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};

    use super::*;

    /// Writes one frame into `w` (made with [`WRITE_BUFFER`]'s capacity). Bulk data at least as
    /// large as the buffer goes out with its head in one `writev` (after what is buffered),
    /// straight from where it lies: no copy into the buffer, one system call instead of two.
    /// Does not flush otherwise.
    pub async fn write_frame<W: AsyncWrite + Unpin>(
        w: &mut BufWriter<W>,
        frame: &Encoded,
    ) -> io::Result<()> {
        if frame.data.len() < WRITE_BUFFER {
            w.write_all(&frame.head).await?;
            if !frame.data.is_empty() {
                w.write_all(&frame.data).await?;
            }
            return Ok(());
        }
        w.flush().await?;
        let mut parts = [io::IoSlice::new(&frame.head), io::IoSlice::new(&frame.data)];
        let mut parts = &mut parts[..];
        while !parts.is_empty() {
            let n = w.get_mut().write_vectored(parts).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            io::IoSlice::advance_slices(&mut parts, n);
        }
        Ok(())
    }

    /// Reads one frame of at most `max` bytes and decodes it; the body's bytes arrive straight
    /// in its buffer (not zeroed first).
    pub async fn read_frame<R: AsyncRead + Unpin>(r: &mut R, max: u32) -> Result<Frame, ReadError> {
        let mut prefix = [0u8; 4];
        r.read_exact(&mut prefix)
            .await
            .map_err(ReadError::of_prefix)?;
        let len = frame_len(prefix, max).map_err(ReadError::Protocol)?;
        let mut buf = BytesMut::with_capacity(len);
        while buf.len() < len {
            let want = (len - buf.len()) as u64;
            match (&mut *r).take(want).read_buf(&mut buf).await {
                Ok(0) => return Err(ReadError::Truncated),
                Ok(_) => {}
                Err(e) => return Err(ReadError::Io(e)),
            }
        }
        decode(buf.freeze()).map_err(ReadError::Protocol)
    }
}

#[cfg(feature = "tokio")]
pub use nonblocking::{read_frame, write_frame};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode, Header, OpCode, Reply, Response};
    use iosets_types::JobId;

    fn frame() -> Encoded {
        let h = Header::new(7, JobId(1));
        let data = Reply::Data(Bytes::from_static(b"abc"));
        encode(&Frame::Response(h, OpCode::Read, Response::Ok(data)))
    }

    #[test]
    fn a_frame_written_reads_back() {
        let mut wire = Vec::new();
        write_frame_blocking(&mut wire, &frame()).unwrap();
        write_frame_blocking(&mut wire, &frame()).unwrap();
        let mut r = &wire[..];
        for _ in 0..2 {
            match read_frame_blocking(&mut r, 1 << 20).unwrap() {
                Frame::Response(h, _, Response::Ok(Reply::Data(d))) => {
                    assert_eq!((h.tag, &d[..]), (7, &b"abc"[..]));
                }
                f => panic!("{f:?}"),
            }
        }
        assert!(matches!(
            read_frame_blocking(&mut r, 1 << 20),
            Err(ReadError::Closed)
        ));
    }

    #[test]
    fn a_cut_frame_an_oversized_one_and_garbage_are_told_apart() {
        let mut wire = Vec::new();
        write_frame_blocking(&mut wire, &frame()).unwrap();
        let cut = &wire[..wire.len() - 1];
        assert!(matches!(
            read_frame_blocking(&mut &cut[..], 1 << 20),
            Err(ReadError::Truncated)
        ));
        assert!(matches!(
            read_frame_blocking(&mut &wire[..], 8),
            Err(ReadError::Protocol(ProtoError::TooLarge { .. }))
        ));
        let mut garbage = wire.clone();
        garbage[4] = 0xff; // the version byte
        let e = read_frame_blocking(&mut &garbage[..], 1 << 20).unwrap_err();
        assert!(matches!(e, ReadError::Protocol(_)), "{e:?}");
        assert_eq!(io::Error::from(e).kind(), io::ErrorKind::InvalidData);
        let eof = io::Error::from(ReadError::Closed);
        assert_eq!(eof.kind(), io::ErrorKind::UnexpectedEof);
    }
}
