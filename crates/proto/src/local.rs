//! The same-host transport's primitives: a memory region shared between a client and a server,
//! and a descriptor passed over a Unix-domain socket.
//!
//! # What it is
//! A client on the I/O node need not push its data through a socket. It creates a [`Region`] (a
//! sealed `memfd`, mapped in its own address space), passes the descriptor once to each server
//! over a Unix-domain socket ([`send_with_fd`], [`recv_with_fd`]: `SCM_RIGHTS`), and from then on
//! its data frames carry only a place in the region: [`Request::ReadShared`] and
//! [`Request::WriteShared`] name `(at, len)`. The server maps the descriptor as a
//! [`PeerRegion`] and its workers `pwrite` from it or `pread` into it: one copy, the one a
//! process doing its own I/O makes too.
//!
//! # Who trusts whom
//! - **The server trusts nothing the client says.** A [`PeerRegion`] is touched only by the
//!   kernel (`pread`/`pwrite` on raw pointers), never through a Rust reference, so a client that
//!   scribbles on its region meanwhile can only put garbage into its own request. Every
//!   `(at, len)` is checked against the mapped length, without overflow ([`PeerRegion::check`]).
//!   A region must be sealed against shrinking ([`PeerRegion::attach`] refuses it otherwise); and
//!   since only the kernel reads the mapping, even a shrunk one would fail a request with
//!   `EFAULT`, not crash the server with `SIGBUS`.
//! - **The client trusts its server** as it already trusts it with its data: a server writes only
//!   into the ranges its client named in a read. On the client side, ranges come from the
//!   region's allocator ([`Region::alloc`]), so the client's own views of the region ([`Slot`]
//!   and the [`Bytes`] of [`Slot::freeze`]) never overlap, and a range is given out again only
//!   after its last view is gone.
//!
//! # What it is not
//! Not a connection: the frames still travel on a byte stream (the Unix socket) and this module
//! knows nothing of requests. The caller decides when a range may be reused (for example, not
//! while a server may still be reading or writing it).
//!
//! # Why unsafe code here
//! Memory shared with another process cannot be mapped, or handed to the kernel, without it. The
//! workspace forbids unsafe code; this module is the one exception outside the C library, and
//! every block says why it is sound.
#![allow(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

#[cfg(doc)]
use crate::Request;

/// The granularity of region ranges: allocations start and end on page boundaries.
pub const PAGE: usize = 4096;

/// Why a region could not be made, attached or used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LocalError {
    /// A system call failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// A range reaches outside the region (or its end overflows).
    #[error("range of {len} bytes at {at} is outside the shared region of {region} bytes")]
    OutOfRange {
        /// The range's start in the region.
        at: u64,
        /// Its length.
        len: u64,
        /// The region's length.
        region: u64,
    },
    /// A descriptor that cannot be a shared region.
    #[error("not a usable shared region: {0}")]
    Invalid(String),
}

impl LocalError {
    /// The errno to answer a request with: `EFAULT` for a range outside the region, the system
    /// call's own for an I/O failure, `EINVAL` otherwise.
    pub fn errno(&self) -> i32 {
        match self {
            LocalError::Io { source, .. } => source
                .raw_os_error()
                .unwrap_or(rustix::io::Errno::IO.raw_os_error()),
            LocalError::OutOfRange { .. } => rustix::io::Errno::FAULT.raw_os_error(),
            LocalError::Invalid(_) => rustix::io::Errno::INVAL.raw_os_error(),
        }
    }
}

fn io_err(what: &'static str) -> impl FnOnce(rustix::io::Errno) -> LocalError {
    move |e| LocalError::Io {
        what,
        source: e.into(),
    }
}

/// A shared mapping of a whole descriptor; unmapped on drop.
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a mapping is plain memory, valid in every thread of the process until it is unmapped
// (on drop, when no other thread can hold it any more). Who may access which bytes is decided by
// the types built on it (`Region`'s allocator, `PeerRegion`'s kernel-only access).
unsafe impl Send for Mapping {}
// SAFETY: as for `Send`: `&Mapping` gives access to no bytes by itself.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(fd: BorrowedFd<'_>, len: usize) -> Result<Mapping, LocalError> {
        // SAFETY: a new shared mapping at an address the kernel chooses, so it overlaps no
        // existing Rust object; `len` is the descriptor's length, checked by the callers.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                len,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                fd,
                0,
            )
        }
        .map_err(io_err("mapping the shared region"))?;
        let base = NonNull::new(p.cast::<u8>()).ok_or_else(|| LocalError::Io {
            what: "mapping the shared region",
            source: io::Error::other("mmap returned a null pointer"),
        })?;
        Ok(Mapping { base, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly what mmap returned, and nothing refers to the
        // mapping any more: every view holds an `Arc` to its owner, which owns this mapping.
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.len) };
    }
}

/// A client's shared region: a sealed `memfd` mapped read-write in this process, with an
/// allocator of page-aligned ranges. Pass [`fd`](Region::fd) to a server with
/// [`send_with_fd`]; name ranges of it in [`Request::ReadShared`] and
/// [`Request::WriteShared`].
pub struct Region {
    map: Mapping,
    fd: OwnedFd,
    /// Free ranges, start → length, coalesced, page-aligned.
    free: Mutex<BTreeMap<usize, usize>>,
}

impl fmt::Debug for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.map.len)
            .field("free", &self.free_bytes())
            .finish()
    }
}

impl Region {
    /// A new region of `len` bytes (rounded up to a page), all zero, sealed so that its length
    /// can never change. Memory is used only as pages are first touched.
    pub fn create(len: usize) -> Result<Arc<Region>, LocalError> {
        let len = len
            .max(PAGE)
            .checked_next_multiple_of(PAGE)
            .ok_or_else(|| LocalError::Invalid(format!("{len} bytes is too large")))?;
        let fd = rustix::fs::memfd_create(
            "iosets-region",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )
        .map_err(io_err("creating the shared region (memfd_create)"))?;
        rustix::fs::ftruncate(&fd, len as u64).map_err(io_err("sizing the shared region"))?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
            .map_err(io_err("sealing the shared region"))?;
        let map = Mapping::new(fd.as_fd(), len)?;
        Ok(Arc::new(Region {
            map,
            fd,
            free: Mutex::new(BTreeMap::from([(0, len)])),
        }))
    }

    /// Its length in bytes.
    pub fn len(&self) -> usize {
        self.map.len
    }

    /// Whether it has no bytes (never: a region has at least a page).
    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// The descriptor to pass to servers.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<usize, usize>> {
        // Inserts and removals of whole entries only: a poisoned map is still consistent.
        self.free.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bytes not allocated.
    pub fn free_bytes(&self) -> usize {
        self.lock().values().sum()
    }

    /// A range of `len` bytes (rounded up to whole pages), the lowest free one that fits, or
    /// `None` when none is free (or `len` is 0). The range is this slot's alone until the slot
    /// and every [`Bytes`] frozen from it are dropped.
    pub fn alloc(self: &Arc<Self>, len: usize) -> Option<Slot> {
        if len == 0 || len > self.map.len {
            return None;
        }
        let cap = len.checked_next_multiple_of(PAGE)?;
        let mut free = self.lock();
        let (&start, &size) = free.iter().find(|(_, &size)| size >= cap)?;
        free.remove(&start);
        if size > cap {
            free.insert(start + cap, size - cap);
        }
        Some(Slot {
            lease: Lease {
                region: self.clone(),
                start,
                len,
                cap,
            },
        })
    }

    fn release(&self, start: usize, cap: usize) {
        let mut free = self.lock();
        let mut start = start;
        let mut size = cap;
        if let Some((&prev, &prev_size)) = free.range(..start).next_back() {
            if prev + prev_size == start {
                free.remove(&prev);
                start = prev;
                size += prev_size;
            }
        }
        if let Some(next_size) = free.remove(&(start + size)) {
            size += next_size;
        }
        free.insert(start, size);
    }

    /// Where `data` lies in this region, if it lies wholly inside it (a [`Slot`] frozen into
    /// [`Bytes`], or a slice of one): its offset, to send instead of the bytes.
    pub fn locate(&self, data: &[u8]) -> Option<u64> {
        if data.is_empty() {
            return None;
        }
        let base = self.map.base.as_ptr() as usize;
        let start = data.as_ptr() as usize;
        let end = start.checked_add(data.len())?;
        (start >= base && end <= base + self.map.len).then(|| (start - base) as u64)
    }
}

/// An allocated range; released on drop.
struct Lease {
    region: Arc<Region>,
    start: usize,
    len: usize,
    cap: usize,
}

impl Lease {
    fn ptr(&self) -> *mut u8 {
        // SAFETY: `start + len <= region length` (the allocator only hands out ranges inside
        // the mapping), so the pointer stays inside the mapping.
        unsafe { self.region.map.base.as_ptr().add(self.start) }
    }
}

impl AsRef<[u8]> for Lease {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: the range is inside the live mapping (held by `region`), allocated to this
        // lease alone, and initialised (a memfd reads as zeros until written). Only a
        // misbehaving server could write it meanwhile (see the module documentation).
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len) }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.region.release(self.start, self.cap);
    }
}

/// A range of a [`Region`], writable by this process alone until it is frozen or dropped.
pub struct Slot {
    lease: Lease,
}

impl fmt::Debug for Slot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Slot")
            .field("offset", &self.lease.start)
            .field("len", &self.lease.len)
            .finish()
    }
}

impl Slot {
    /// Its offset in the region (what a frame carries).
    pub fn offset(&self) -> u64 {
        self.lease.start as u64
    }

    /// An immutable view of the whole slot; the range stays allocated until every clone and
    /// slice of it is dropped. [`Region::locate`] finds it again.
    pub fn freeze(self) -> Bytes {
        Bytes::from_owner(self.lease)
    }
}

impl Deref for Slot {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.lease.as_ref()
    }
}

impl DerefMut for Slot {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as `Lease::as_ref`, and the slot is the range's only view (it has not been
        // frozen), borrowed mutably here.
        unsafe { std::slice::from_raw_parts_mut(self.lease.ptr(), self.lease.len) }
    }
}

/// A region received from a client, mapped in the server. Only the kernel touches its bytes
/// ([`write_to`](PeerRegion::write_to), [`read_from`](PeerRegion::read_from)).
pub struct PeerRegion {
    map: Mapping,
}

impl fmt::Debug for PeerRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerRegion")
            .field("len", &self.map.len)
            .finish()
    }
}

impl PeerRegion {
    /// Maps a client's region. Refused unless `fd` is a regular file (a `memfd`) of exactly
    /// `announced` bytes, at most `max`, sealed against shrinking.
    pub fn attach(fd: OwnedFd, announced: u64, max: u64) -> Result<PeerRegion, LocalError> {
        let st = rustix::fs::fstat(&fd).map_err(io_err("stat of the shared region"))?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
            return Err(LocalError::Invalid("the descriptor is not a memfd".into()));
        }
        let size = st.st_size as u64;
        if size != announced {
            return Err(LocalError::Invalid(format!(
                "the region announces {announced} bytes but its descriptor has {size}"
            )));
        }
        if size == 0 || size > max {
            return Err(LocalError::Invalid(format!(
                "a region of {size} bytes: the server accepts 1 to {max}"
            )));
        }
        let seals = rustix::fs::fcntl_get_seals(&fd).map_err(|_| {
            LocalError::Invalid("the descriptor is not a memfd that can be sealed".into())
        })?;
        if !seals.contains(SealFlags::SHRINK) {
            return Err(LocalError::Invalid(
                "the region is not sealed against shrinking (F_SEAL_SHRINK)".into(),
            ));
        }
        let len = usize::try_from(size)
            .map_err(|_| LocalError::Invalid(format!("{size} bytes do not fit in memory")))?;
        Ok(PeerRegion {
            map: Mapping::new(fd.as_fd(), len)?,
        })
    }

    /// Its length in bytes.
    pub fn len(&self) -> u64 {
        self.map.len as u64
    }

    /// Whether it has no bytes (never: an empty region is refused).
    pub fn is_empty(&self) -> bool {
        self.map.len == 0
    }

    /// Checks that `len` bytes at `at` lie inside the region; returns `at` as an index.
    pub fn check(&self, at: u64, len: u64) -> Result<usize, LocalError> {
        let out = || LocalError::OutOfRange {
            at,
            len,
            region: self.map.len as u64,
        };
        let end = at.checked_add(len).ok_or_else(out)?;
        if end > self.map.len as u64 {
            return Err(out());
        }
        usize::try_from(at).map_err(|_| out())
    }

    /// `pwrite`s the `len` bytes at `at` into `file` at `offset`, all of them.
    pub fn write_to(
        &self,
        file: BorrowedFd<'_>,
        at: u64,
        len: u32,
        offset: u64,
    ) -> Result<u32, LocalError> {
        let done = self.transfer(Way::Pwrite, file, at, len, offset)?;
        if done < len {
            return Err(LocalError::Io {
                what: Way::Pwrite.what(),
                source: io::ErrorKind::WriteZero.into(),
            });
        }
        Ok(done)
    }

    /// `pread`s up to `len` bytes of `file` at `offset` into the region at `at`; returns how
    /// many (fewer at the end of the file).
    pub fn read_from(
        &self,
        file: BorrowedFd<'_>,
        at: u64,
        len: u32,
        offset: u64,
    ) -> Result<u32, LocalError> {
        self.transfer(Way::Pread, file, at, len, offset)
    }

    /// Moves up to `len` bytes between the region at `at` and `file` at `offset` the `way` asked,
    /// again after a short transfer or an interruption, until all are moved or one moves none;
    /// returns how many moved.
    fn transfer(
        &self,
        way: Way,
        file: BorrowedFd<'_>,
        at: u64,
        len: u32,
        offset: u64,
    ) -> Result<u32, LocalError> {
        let start = self.check(at, u64::from(len))?;
        let len = len as usize;
        check_file_range(offset, len)?;
        let mut done = 0usize;
        while done < len {
            let (fd, off) = (file.as_raw_fd(), (offset + done as u64) as libc::off_t);
            // SAFETY: `[start, start + len)` is inside the mapping (checked above), which
            // outlives the call; only the kernel reads or writes it, no Rust reference to it
            // exists.
            let n = unsafe {
                let p = self.map.base.as_ptr().add(start + done);
                match way {
                    Way::Pread => libc::pread(fd, p.cast(), len - done, off),
                    Way::Pwrite => libc::pwrite(fd, p.cast(), len - done, off),
                }
            };
            match n {
                n if n > 0 => done += n as usize,
                0 => break,
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(LocalError::Io {
                            what: way.what(),
                            source: e,
                        });
                    }
                }
            }
        }
        Ok(done as u32)
    }
}

/// Which way [`PeerRegion::transfer`] moves bytes.
#[derive(Clone, Copy, Debug)]
enum Way {
    /// From the file into the region.
    Pread,
    /// From the region into the file.
    Pwrite,
}

impl Way {
    /// What failed, for [`LocalError::Io`].
    fn what(self) -> &'static str {
        match self {
            Way::Pread => "pread into the shared region",
            Way::Pwrite => "pwrite from the shared region",
        }
    }
}

/// A file range must end at or below `i64::MAX` (what `pread`/`pwrite` take).
fn check_file_range(offset: u64, len: usize) -> Result<(), LocalError> {
    match offset.checked_add(len as u64) {
        Some(end) if end <= i64::MAX as u64 => Ok(()),
        _ => Err(LocalError::Io {
            what: "file offset",
            source: io::Error::from_raw_os_error(rustix::io::Errno::INVAL.raw_os_error()),
        }),
    }
}

/// Sends `bytes` on the Unix socket `sock` with the descriptor `fd` attached (`SCM_RIGHTS`);
/// returns how many bytes were sent (the descriptor goes with the first).
pub fn send_with_fd(sock: BorrowedFd<'_>, bytes: &[u8], fd: BorrowedFd<'_>) -> io::Result<usize> {
    let fds = [fd];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !control.push(SendAncillaryMessage::ScmRights(&fds)) {
        return Err(io::Error::other("no room for the descriptor"));
    }
    Ok(rustix::net::sendmsg(
        sock,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?)
}

/// Receives bytes from the Unix socket `sock` into `buf`, with the first descriptor attached to
/// them if any (more are closed). Returns how many bytes (0: the peer closed).
pub fn recv_with_fd(sock: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(usize, Option<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(buf)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut first = None;
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(fds) = msg {
            for fd in fds {
                if first.is_none() {
                    first = Some(fd);
                }
            }
        }
    }
    Ok((got.bytes, first))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    #[test]
    fn slots_never_overlap_and_come_back() {
        let r = Region::create(16 * PAGE).unwrap();
        assert_eq!(r.len(), 16 * PAGE);
        let a = r.alloc(3 * PAGE).unwrap();
        let b = r.alloc(1).unwrap();
        assert_eq!(a.offset(), 0);
        assert_eq!(b.offset(), 3 * PAGE as u64);
        assert_eq!(b.len(), 1);
        assert_eq!(r.free_bytes(), 12 * PAGE);
        assert!(r.alloc(13 * PAGE).is_none());
        drop(a);
        // The freed range is the lowest that fits again.
        let c = r.alloc(2 * PAGE).unwrap();
        assert_eq!(c.offset(), 0);
        drop((b, c));
        assert_eq!(r.free_bytes(), 16 * PAGE);
        // Coalesced: the whole region fits again.
        assert!(r.alloc(16 * PAGE).is_some());
        assert!(r.alloc(0).is_none());
    }

    #[test]
    fn frozen_bytes_hold_their_range_and_are_located() {
        let r = Region::create(4 * PAGE).unwrap();
        let mut s = r.alloc(PAGE + 10).unwrap();
        s.fill(7);
        let b = s.freeze();
        assert_eq!(b.len(), PAGE + 10);
        assert!(b.iter().all(|&x| x == 7));
        assert_eq!(r.free_bytes(), 2 * PAGE);
        let tail = b.slice(100..200);
        assert_eq!(r.locate(&tail), Some(100));
        drop(b);
        assert_eq!(r.free_bytes(), 2 * PAGE, "a slice still holds the range");
        drop(tail);
        assert_eq!(r.free_bytes(), 4 * PAGE);
        assert_eq!(r.locate(&[1u8, 2, 3]), None);
        assert_eq!(r.locate(&[]), None);
    }

    #[test]
    fn a_peer_maps_the_same_bytes_and_checks_every_range() {
        let r = Region::create(2 * PAGE).unwrap();
        let fd = r.fd().try_clone_to_owned().unwrap();
        let peer = PeerRegion::attach(fd, 2 * PAGE as u64, 1 << 30).unwrap();
        assert_eq!(peer.len(), 2 * PAGE as u64);
        let file = tempfile();
        let mut s = r.alloc(100).unwrap();
        s.copy_from_slice(&[9u8; 100]);
        assert_eq!(peer.write_to(file.as_fd(), 0, 100, 5).unwrap(), 100);
        let mut back = r.alloc(200).unwrap();
        let off = back.offset();
        assert_eq!(peer.read_from(file.as_fd(), off, 200, 0).unwrap(), 105);
        assert_eq!(&back[..5], &[0u8; 5]);
        assert_eq!(&back[5..105], &[9u8; 100][..]);
        back[0] = 1;
        for (at, len) in [
            (2 * PAGE as u64, 1),
            (2 * PAGE as u64 - 1, 2),
            (u64::MAX, 2),
            (1, u64::MAX),
        ] {
            assert!(matches!(
                peer.check(at, len),
                Err(LocalError::OutOfRange { .. })
            ));
        }
        let e = peer
            .write_to(file.as_fd(), 2 * PAGE as u64 - 1, 2, 0)
            .unwrap_err();
        assert_eq!(e.errno(), rustix::io::Errno::FAULT.raw_os_error());
        assert!(peer.write_to(file.as_fd(), 0, 1, u64::MAX).is_err());
    }

    fn tempfile() -> std::fs::File {
        let fd = rustix::fs::memfd_create("test-file", MemfdFlags::CLOEXEC).unwrap();
        std::fs::File::from(fd)
    }

    #[test]
    fn unusable_descriptors_are_refused() {
        // Not sealed.
        let plain = rustix::fs::memfd_create("plain", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&plain, PAGE as u64).unwrap();
        let e = PeerRegion::attach(plain, PAGE as u64, 1 << 20).unwrap_err();
        assert!(e.to_string().contains("sealed"), "{e}");
        // Wrong announced length, too large, a directory.
        let r = Region::create(PAGE).unwrap();
        let fd = || r.fd().try_clone_to_owned().unwrap();
        assert!(PeerRegion::attach(fd(), 2 * PAGE as u64, 1 << 20).is_err());
        assert!(PeerRegion::attach(fd(), PAGE as u64, 100).is_err());
        let dir = std::fs::File::open("/").unwrap();
        assert!(PeerRegion::attach(dir.into(), 0, 1 << 20).is_err());
    }

    #[test]
    fn a_descriptor_travels_with_its_bytes() {
        let (a, mut b) = UnixStream::pair().unwrap();
        let r = Region::create(PAGE).unwrap();
        let mut s = r.alloc(4).unwrap();
        s.copy_from_slice(b"abcd");
        assert_eq!(send_with_fd(a.as_fd(), b"hello", r.fd()).unwrap(), 5);
        (&a).write_all(b" world").unwrap();
        let mut buf = [0u8; 5];
        let (n, fd) = recv_with_fd(b.as_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        let peer = PeerRegion::attach(fd.unwrap(), PAGE as u64, 1 << 20).unwrap();
        let file = tempfile();
        assert_eq!(peer.write_to(file.as_fd(), 0, 4, 0).unwrap(), 4);
        let mut back = [0u8; 4];
        rustix::io::pread(&file, &mut back, 0).unwrap();
        assert_eq!(&back, b"abcd");
        // Later bytes carry no descriptor.
        let mut rest = [0u8; 6];
        b.read_exact(&mut rest).unwrap();
        assert_eq!(&rest, b" world");
    }
}
