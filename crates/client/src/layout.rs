//! Where a file's bytes live: the deterministic striping layout.
//!
//! A file's data is cut into chunks of `chunk_size` bytes; chunk `k` (bytes
//! `[k·chunk_size, (k+1)·chunk_size)`) of the file at path `p` is served by server
//! `(h(p) + k) mod n`, where `n` is the number of servers and `h` is **FNV-1a 64** of the path's
//! UTF-8 bytes (after normalisation, see [`normalize_path`]). Every server writes its chunks at
//! their logical offsets in the backing file of the same path, so with one shared root the file
//! is complete, and with separate roots each server holds a sparse file with its own chunks.
//!
//! FNV-1a is used rather than the standard library's hasher because the layout must be the same
//! in every process, every run and every version: `std`'s `RandomState` is seeded per process.
//! The metadata of path `p` (attributes, directory listings) is read from its *home* server,
//! `h(p) mod n`, the server that also holds chunk 0.

use crate::error::ClientError;

pub use iosets_types::hash::fnv1a64;

/// The canonical form of a path as the layout hashes it and the servers see it: components
/// separated by one `/`, no empty or `.` component, no leading or trailing `/` (a leading `/`
/// means the servers' root, like the root of a mount). `""` is the root itself. A `..`
/// component is refused: paths never leave the servers' root.
pub fn normalize_path(path: &str) -> Result<String, ClientError> {
    let mut out = String::with_capacity(path.len());
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(ClientError::InvalidPath {
                    path: path.to_owned(),
                    reason: "`..` is not allowed".into(),
                })
            }
            p => {
                if p.contains('\0') {
                    return Err(ClientError::InvalidPath {
                        path: path.to_owned(),
                        reason: "NUL byte".into(),
                    });
                }
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(p);
            }
        }
    }
    Ok(out)
}

/// The striping layout of a set of `n` servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    chunk_size: u64,
    servers: usize,
}

/// One piece of a byte range: the part of it inside one chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    /// The server that holds it.
    pub server: usize,
    /// Its offset in the file.
    pub offset: u64,
    /// Its length (at most the chunk size).
    pub len: u64,
    /// Its offset inside the caller's range (`offset - range start`).
    pub at: u64,
}

impl Layout {
    /// The layout of `servers` servers with chunks of `chunk_size` bytes; an error unless both
    /// are positive.
    pub fn new(chunk_size: u64, servers: usize) -> Result<Layout, ClientError> {
        if chunk_size == 0 {
            return Err(ClientError::Config("chunk size must be positive".into()));
        }
        if servers == 0 {
            return Err(ClientError::Config("at least one server is needed".into()));
        }
        Ok(Layout {
            chunk_size,
            servers,
        })
    }

    /// The chunk size in bytes.
    pub fn chunk_size(&self) -> u64 {
        self.chunk_size
    }

    /// The number of servers.
    pub fn servers(&self) -> usize {
        self.servers
    }

    /// The home server of `path` (a normalised path): `h(path) mod n`. It answers the path's
    /// read-only metadata and is the first to see its namespace changes.
    pub fn home(&self, path: &str) -> usize {
        (fnv1a64(path.as_bytes()) % self.servers as u64) as usize
    }

    /// The server of chunk `chunk` of `path`: `(h(path) + chunk) mod n`.
    pub fn server_of(&self, path: &str, chunk: u64) -> usize {
        let n = self.servers as u64;
        ((fnv1a64(path.as_bytes()) % n + chunk % n) % n) as usize
    }

    /// The pieces of the range `[offset, offset + len)` of `path`, in file order, one per chunk
    /// it touches. Empty if `len` is 0.
    pub fn pieces(&self, path: &str, offset: u64, len: u64) -> Vec<Piece> {
        let mut out = Vec::new();
        if len == 0 {
            return out;
        }
        let home = fnv1a64(path.as_bytes()) % self.servers as u64;
        let end = offset.saturating_add(len);
        let mut pos = offset;
        while pos < end {
            let chunk = pos / self.chunk_size;
            let chunk_end = (chunk + 1).saturating_mul(self.chunk_size);
            let piece_end = chunk_end.min(end);
            out.push(Piece {
                server: ((home + chunk % self.servers as u64) % self.servers as u64) as usize,
                offset: pos,
                len: piece_end - pos,
                at: pos - offset,
            });
            pos = piece_end;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_the_reference_vectors() {
        // From the FNV reference test suite.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn normalisation_is_canonical_and_refuses_dotdot() {
        assert_eq!(normalize_path("/a//b/./c/").unwrap(), "a/b/c");
        assert_eq!(normalize_path("a/b").unwrap(), "a/b");
        assert_eq!(normalize_path("/").unwrap(), "");
        assert_eq!(normalize_path(".").unwrap(), "");
        assert!(normalize_path("a/../b").is_err());
        assert!(normalize_path("..").is_err());
    }

    #[test]
    fn pieces_cover_the_range_in_order_within_chunks() {
        let l = Layout::new(10, 3).unwrap();
        let home = l.home("f");
        let p = l.pieces("f", 7, 25);
        let spans: Vec<(u64, u64, u64)> = p.iter().map(|p| (p.offset, p.len, p.at)).collect();
        assert_eq!(
            spans,
            vec![(7, 3, 0), (10, 10, 3), (20, 10, 13), (30, 2, 23)]
        );
        for (i, piece) in p.iter().enumerate() {
            assert_eq!(piece.server, (home + i) % 3);
            assert_eq!(piece.server, l.server_of("f", piece.offset / 10));
        }
        assert!(l.pieces("f", 5, 0).is_empty());
        assert_eq!(l.server_of("f", 0), home);
    }

    #[test]
    fn one_server_holds_everything() {
        let l = Layout::new(4, 1).unwrap();
        assert!(l.pieces("x/y", 3, 100).iter().all(|p| p.server == 0));
        assert!(Layout::new(0, 1).is_err());
        assert!(Layout::new(1, 0).is_err());
    }
}
