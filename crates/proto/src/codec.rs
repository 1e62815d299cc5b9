//! Frames to bytes and back.

use bytes::Bytes;
use iosets_types::{JobId, Priority, UnixNanos};

use crate::message::{
    Attr, Control, Creds, DirEntry, FileKind, Groups, Header, Kind, OpCode, OpenFlags, Reply,
    Request, Response, SetAttr, SetTime, Statfs,
};
use crate::{Elsewhere, ProtoError, HEADER_LEN, VERSION};

/// One decoded frame.
#[derive(Clone, Debug, PartialEq)]
pub enum Frame {
    /// A client's request.
    Request(Header, Request),
    /// A server's response to the request with the same tag; `OpCode` echoes the request's.
    Response(Header, OpCode, Response),
}

/// An encoded frame: `head` (length prefix, header and small fields) followed on the wire by
/// `data` (the bulk payload of a write or a read reply, kept apart to avoid a copy).
#[derive(Clone, Debug)]
pub struct Encoded {
    /// Everything up to the bulk data, including the length prefix.
    pub head: Vec<u8>,
    /// The bulk data, empty if none.
    pub data: Bytes,
}

impl Encoded {
    /// The whole frame in one buffer.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.head.len() + self.data.len());
        v.extend_from_slice(&self.head);
        v.extend_from_slice(&self.data);
        v
    }

    /// The frame's length on the wire.
    pub fn wire_len(&self) -> usize {
        self.head.len() + self.data.len()
    }
}

/// The length announced by a frame's 4-byte prefix, checked against `max` before anyone
/// allocates a buffer for it, and against the fixed header's length.
pub fn frame_len(prefix: [u8; 4], max: u32) -> Result<usize, ProtoError> {
    let len = u32::from_le_bytes(prefix);
    if len > max {
        return Err(ProtoError::TooLarge { len, max });
    }
    if (len as usize) < HEADER_LEN {
        return Err(ProtoError::Truncated {
            field: "header",
            needed: HEADER_LEN - len as usize,
        });
    }
    Ok(len as usize)
}

struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn i32(&mut self, v: i32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A string of at most `u16::MAX` bytes; longer ones are cut at a character boundary
    /// (only messages can be that long; paths are limited far below by the server).
    fn str(&mut self, s: &str) {
        let mut end = s.len().min(u16::MAX as usize);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.u16(end as u16);
        self.buf.extend_from_slice(&s.as_bytes()[..end]);
    }
    /// Fixed-length bytes (nonces, proofs): no length, the field's size is the format's.
    fn raw(&mut self, b: &[u8]) {
        self.buf.extend_from_slice(b);
    }
    /// A long text (JSON reports): `u32` length.
    fn text(&mut self, s: &str) {
        self.u32(s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
    }
}

/// Encodes `frame`. Strings longer than 65,535 bytes are cut (paths that long are refused by
/// the server anyway); bulk data longer than `u32::MAX` cannot be expressed and panics.
pub fn encode(frame: &Frame) -> Encoded {
    let mut w = Writer {
        buf: Vec::with_capacity(64),
    };
    w.u32(0); // length, patched below
    let (kind, header, op) = match frame {
        Frame::Request(h, r) => (Kind::Request, h, r.op()),
        Frame::Response(h, op, _) => (Kind::Response, h, *op),
    };
    let shared = matches!(
        frame,
        Frame::Request(_, Request::ReadShared { .. } | Request::WriteShared { .. })
    );
    let groups = header.creds.map(|c| c.groups).filter(|g| !g.is_empty());
    w.u8(VERSION);
    w.u8(kind as u8);
    w.u16(
        u16::from(header.priority.is_some())
            | (u16::from(header.creds.is_some()) << 1)
            | (u16::from(shared) << 2)
            | (u16::from(header.phase.is_some()) << 3)
            | (u16::from(header.elsewhere.is_some()) << 4)
            | (u16::from(groups.is_some()) << 5),
    );
    w.u64(header.tag);
    w.u64(header.job.0);
    w.f64(header.priority.map_or(0.0, Priority::get));
    w.u32(header.creds.map_or(0, |c| c.uid));
    w.u32(header.creds.map_or(0, |c| c.gid));
    w.u64(header.phase.map_or(0, |p| p.0));
    // Optional, after the fixed part: only a request that carries it pays its 12 bytes.
    if let Some(e) = header.elsewhere {
        w.u32(e.ops);
        w.u64(e.bytes);
    }
    // Supplementary groups, when the caller has any: a count byte and the ids.
    if let Some(g) = groups {
        w.u8(g.as_slice().len() as u8);
        for id in g.as_slice() {
            w.u32(*id);
        }
    }
    w.u8(op as u8);
    let mut data = Bytes::new();
    match frame {
        Frame::Request(_, req) => encode_request(&mut w, req, &mut data),
        Frame::Response(_, _, resp) => encode_response(&mut w, resp, &mut data),
    }
    let total = w.buf.len() - 4 + data.len();
    let total = u32::try_from(total).expect("frame longer than 4 GiB");
    w.buf[..4].copy_from_slice(&total.to_le_bytes());
    Encoded { head: w.buf, data }
}

fn encode_request(w: &mut Writer, req: &Request, data: &mut Bytes) {
    match req {
        Request::Lookup { path }
        | Request::Fsync { path }
        | Request::Unlink { path }
        | Request::Rmdir { path }
        | Request::Readdir { path }
        | Request::ReaddirPlus { path }
        | Request::Lstat { path }
        | Request::Readlink { path } => w.str(path),
        Request::Statfs => {}
        Request::Setattr { path, set } => {
            w.str(path);
            encode_setattr(w, set);
        }
        Request::Symlink { path, target } => {
            w.str(path);
            w.str(target);
        }
        Request::Mknod { path, mode, rdev } => {
            w.str(path);
            w.u32(*mode);
            w.u64(*rdev);
        }
        Request::Link { from, to } => {
            w.str(from);
            w.str(to);
        }
        Request::Create {
            path,
            mode,
            exclusive,
        } => {
            w.str(path);
            w.u32(*mode);
            w.u8(u8::from(*exclusive));
        }
        Request::Open { path, flags } => {
            w.str(path);
            w.u32(flags.0);
        }
        Request::Read { path, offset, len } => {
            w.str(path);
            w.u64(*offset);
            w.u32(*len);
        }
        Request::Write {
            path,
            offset,
            data: d,
        } => {
            w.str(path);
            w.u64(*offset);
            w.u32(u32::try_from(d.len()).expect("write longer than 4 GiB"));
            *data = d.clone();
        }
        Request::Truncate { path, size } => {
            w.str(path);
            w.u64(*size);
        }
        Request::ReadShared {
            path,
            offset,
            len,
            at,
        }
        | Request::WriteShared {
            path,
            offset,
            len,
            at,
        } => {
            w.str(path);
            w.u64(*offset);
            w.u32(*len);
            w.u64(*at);
        }
        Request::LocalTransport | Request::PhaseEnd => {}
        Request::JobName { name } => w.str(name),
        Request::AttachRegion { len } => w.u64(*len),
        Request::Auth { nonce, proof } => {
            w.raw(nonce);
            w.raw(proof);
        }
        Request::Mkdir { path, mode } => {
            w.str(path);
            w.u32(*mode);
        }
        Request::Rename { from, to } => {
            w.str(from);
            w.str(to);
        }
        Request::Control { token, op } => {
            w.str(token);
            match op {
                Control::SetPriority { job, priority } => {
                    w.u64(job.0);
                    w.f64(priority.get());
                }
                Control::ClearPriority { job } => w.u64(job.0),
                Control::Policy { name, options } => {
                    w.str(name);
                    w.u16(u16::try_from(options.len()).expect("more than 65535 options"));
                    for (k, v) in options {
                        w.str(k);
                        w.str(v);
                    }
                }
                Control::RuleAdd { rule, rank } => {
                    w.str(rule);
                    w.u32(rank.unwrap_or(u32::MAX));
                }
                Control::RuleDel { name } => w.str(name),
                Control::ShareSet { node, weight } => {
                    w.str(node);
                    // 0 clears: a weight is never 0.
                    w.f64(weight.unwrap_or(0.0));
                }
                Control::JobInfo {
                    job,
                    account,
                    nodes,
                } => {
                    w.u64(job.0);
                    w.str(account.as_deref().unwrap_or(""));
                    w.u32(nodes.unwrap_or(0));
                }
                Control::Jobs | Control::Stats | Control::Rules | Control::Shares => {}
            }
        }
    }
}

const REPLY_ATTR: u8 = 1;
const REPLY_DATA: u8 = 2;
const REPLY_WRITTEN: u8 = 3;
const REPLY_DONE: u8 = 4;
const REPLY_ENTRIES: u8 = 5;
const REPLY_JSON: u8 = 6;
const REPLY_STATFS: u8 = 7;
const REPLY_PLACED: u8 = 8;
const REPLY_LOCAL: u8 = 9;
const REPLY_ATTACHED: u8 = 10;
const REPLY_CHALLENGE: u8 = 11;
const REPLY_AUTHENTICATED: u8 = 12;
const REPLY_ENTRY: u8 = 13;
const REPLY_REMOVED: u8 = 14;
const REPLY_ENTRIES_PLUS: u8 = 15;

/// An attribute block's length on the wire ([`encode_attr`]).
const ATTR_LEN: usize = 73;

fn encode_dir_entry(w: &mut Writer, e: &DirEntry) {
    w.str(&e.name);
    w.u8(e.kind as u8);
    w.u64(e.ino);
}

fn decode_dir_entry(r: &mut Reader) -> Result<DirEntry, ProtoError> {
    let name = r.str("entry name")?;
    let kind = decode_kind(r, "entry kind")?;
    let ino = r.u64("entry ino")?;
    Ok(DirEntry { name, kind, ino })
}

/// A listing's entry count, refused when the frame cannot hold that many entries of at least
/// `least` bytes each (so the allocation is bounded by what arrived).
fn entry_count(r: &mut Reader, least: usize) -> Result<usize, ProtoError> {
    let n = r.u32("entry count")? as usize;
    let left = r.buf.len() - r.pos;
    if n > left / least {
        return Err(ProtoError::Truncated {
            field: "entries",
            needed: n * least - left,
        });
    }
    Ok(n)
}

fn encode_attr(w: &mut Writer, a: &Attr) {
    w.u8(a.kind as u8);
    w.u64(a.size);
    w.u32(a.mode);
    w.i64(a.mtime_ns);
    w.i64(a.atime_ns);
    w.i64(a.ctime_ns);
    w.u64(a.ino);
    w.u32(a.nlink);
    w.u32(a.uid);
    w.u32(a.gid);
    w.u64(a.rdev);
    w.u64(a.blocks);
}

// The bits of a setattr's field mask.
const SET_MODE: u8 = 1;
const SET_UID: u8 = 2;
const SET_GID: u8 = 4;
const SET_SIZE: u8 = 8;
const SET_ATIME: u8 = 16;
const SET_MTIME: u8 = 32;
const SET_ALL: u8 = 63;
/// A time field: this tag for "now", otherwise the tag for "at" and the nanoseconds.
const TIME_NOW: u8 = 1;
const TIME_AT: u8 = 2;

fn encode_setattr(w: &mut Writer, s: &SetAttr) {
    let mask = [
        (s.mode.is_some(), SET_MODE),
        (s.uid.is_some(), SET_UID),
        (s.gid.is_some(), SET_GID),
        (s.size.is_some(), SET_SIZE),
        (s.atime.is_some(), SET_ATIME),
        (s.mtime.is_some(), SET_MTIME),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .fold(0, |m, (_, bit)| m | bit);
    w.u8(mask);
    if let Some(v) = s.mode {
        w.u32(v);
    }
    if let Some(v) = s.uid {
        w.u32(v);
    }
    if let Some(v) = s.gid {
        w.u32(v);
    }
    if let Some(v) = s.size {
        w.u64(v);
    }
    for t in [s.atime, s.mtime].into_iter().flatten() {
        match t {
            SetTime::Now => w.u8(TIME_NOW),
            SetTime::At(ns) => {
                w.u8(TIME_AT);
                w.i64(ns);
            }
        }
    }
}

fn encode_response(w: &mut Writer, resp: &Response, data: &mut Bytes) {
    match resp {
        Response::Err { errno, message } => {
            w.i32(*errno);
            w.str(message);
        }
        Response::Ok(reply) => {
            w.i32(0);
            match reply {
                Reply::Attr(a) => {
                    w.u8(REPLY_ATTR);
                    encode_attr(w, a);
                }
                Reply::Entry { attr, dir } => {
                    w.u8(REPLY_ENTRY);
                    encode_attr(w, attr);
                    encode_attr(w, dir);
                }
                Reply::Removed { dir } => {
                    w.u8(REPLY_REMOVED);
                    encode_attr(w, dir);
                }
                Reply::Data(d) => {
                    w.u8(REPLY_DATA);
                    w.u32(u32::try_from(d.len()).expect("read longer than 4 GiB"));
                    *data = d.clone();
                }
                Reply::Written(n) => {
                    w.u8(REPLY_WRITTEN);
                    w.u32(*n);
                }
                Reply::Done => w.u8(REPLY_DONE),
                Reply::Entries(entries) => {
                    w.u8(REPLY_ENTRIES);
                    w.u32(u32::try_from(entries.len()).expect("more than 4G entries"));
                    for e in entries {
                        encode_dir_entry(w, e);
                    }
                }
                Reply::EntriesPlus(entries) => {
                    w.u8(REPLY_ENTRIES_PLUS);
                    w.u32(u32::try_from(entries.len()).expect("more than 4G entries"));
                    for (e, a) in entries {
                        encode_dir_entry(w, e);
                        encode_attr(w, a);
                    }
                }
                Reply::Statfs(s) => {
                    w.u8(REPLY_STATFS);
                    for v in [s.blocks, s.bfree, s.bavail, s.files, s.ffree] {
                        w.u64(v);
                    }
                    for v in [s.bsize, s.namelen, s.frsize] {
                        w.u32(v);
                    }
                }
                Reply::Json(s) => {
                    w.u8(REPLY_JSON);
                    w.text(s);
                }
                Reply::Placed(n) => {
                    w.u8(REPLY_PLACED);
                    w.u32(*n);
                }
                Reply::LocalTransport { socket, id, pid } => {
                    w.u8(REPLY_LOCAL);
                    w.str(socket);
                    w.str(id);
                    w.u32(*pid);
                }
                Reply::Attached { id } => {
                    w.u8(REPLY_ATTACHED);
                    w.str(id);
                }
                Reply::Challenge { nonce } => {
                    w.u8(REPLY_CHALLENGE);
                    w.raw(nonce);
                }
                Reply::Authenticated { proof } => {
                    w.u8(REPLY_AUTHENTICATED);
                    w.raw(proof);
                }
            }
        }
    }
}

/// A bounds-checked reader over one frame's bytes.
struct Reader {
    buf: Bytes,
    pos: usize,
}

impl Reader {
    fn take(&mut self, n: usize, field: &'static str) -> Result<&[u8], ProtoError> {
        let left = self.buf.len() - self.pos;
        if n > left {
            return Err(ProtoError::Truncated {
                field,
                needed: n - left,
            });
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], ProtoError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, field)?);
        Ok(a)
    }
    fn u8(&mut self, field: &'static str) -> Result<u8, ProtoError> {
        Ok(self.array::<1>(field)?[0])
    }
    fn u16(&mut self, field: &'static str) -> Result<u16, ProtoError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }
    fn u32(&mut self, field: &'static str) -> Result<u32, ProtoError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }
    fn u64(&mut self, field: &'static str) -> Result<u64, ProtoError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }
    fn i32(&mut self, field: &'static str) -> Result<i32, ProtoError> {
        Ok(i32::from_le_bytes(self.array(field)?))
    }
    fn i64(&mut self, field: &'static str) -> Result<i64, ProtoError> {
        Ok(i64::from_le_bytes(self.array(field)?))
    }
    fn f64(&mut self, field: &'static str) -> Result<f64, ProtoError> {
        Ok(f64::from_le_bytes(self.array(field)?))
    }
    fn utf8(bytes: &[u8], field: &'static str) -> Result<String, ProtoError> {
        String::from_utf8(bytes.to_vec()).map_err(|_| ProtoError::Invalid {
            field,
            reason: "not UTF-8".into(),
        })
    }
    fn str(&mut self, field: &'static str) -> Result<String, ProtoError> {
        let n = self.u16(field)? as usize;
        let b = self.take(n, field)?;
        Self::utf8(b, field)
    }
    fn text(&mut self, field: &'static str) -> Result<String, ProtoError> {
        let n = self.u32(field)? as usize;
        let b = self.take(n, field)?;
        Self::utf8(b, field)
    }
    fn bulk(&mut self, field: &'static str) -> Result<Bytes, ProtoError> {
        let n = self.u32(field)? as usize;
        let start = self.pos;
        self.take(n, field)?;
        Ok(self.buf.slice(start..start + n))
    }
    fn priority(&mut self, field: &'static str) -> Result<Priority, ProtoError> {
        let v = self.f64(field)?;
        Priority::new(v).ok_or_else(|| ProtoError::Invalid {
            field,
            reason: format!("{v} is not a finite positive number"),
        })
    }
    fn finish(&self) -> Result<(), ProtoError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(ProtoError::Trailing(n)),
        }
    }
}

/// Decodes one frame from `buf`: the bytes after the length prefix, exactly as many as it
/// announced. Never panics; any malformed input is an error.
pub fn decode(buf: Bytes) -> Result<Frame, ProtoError> {
    let mut r = Reader { buf, pos: 0 };
    let version = r.u8("version")?;
    if version != VERSION {
        return Err(ProtoError::Version(version));
    }
    let kind = r.u8("kind")?;
    let flags = r.u16("flags")?;
    if flags & !63 != 0 {
        return Err(ProtoError::Invalid {
            field: "flags",
            reason: format!("unknown bits {:#x}", flags & !63),
        });
    }
    if flags & 32 != 0 && flags & 2 == 0 {
        return Err(ProtoError::Invalid {
            field: "flags",
            reason: "supplementary groups without credentials".into(),
        });
    }
    let shared = flags & 4 != 0;
    let tag = r.u64("tag")?;
    let job = JobId(r.u64("job")?);
    let priority = if flags & 1 != 0 {
        Some(r.priority("priority hint")?)
    } else {
        r.f64("priority hint")?;
        None
    };
    let uid = r.u32("uid")?;
    let gid = r.u32("gid")?;
    let creds = (flags & 2 != 0).then_some(Creds::new(uid, gid));
    let phase = r.u64("phase stamp")?;
    let phase = (flags & 8 != 0).then_some(UnixNanos(phase));
    let elsewhere = if flags & 16 != 0 {
        Some(Elsewhere {
            ops: r.u32("ops served elsewhere")?,
            bytes: r.u64("bytes served elsewhere")?,
        })
    } else {
        None
    };
    let creds = match creds {
        Some(mut c) if flags & 32 != 0 => {
            let n = usize::from(r.u8("group count")?);
            if n == 0 || n > Groups::MAX {
                return Err(ProtoError::Invalid {
                    field: "group count",
                    reason: format!("{n}: must be 1 to {}", Groups::MAX),
                });
            }
            let mut ids = [0u32; Groups::MAX];
            for id in &mut ids[..n] {
                *id = r.u32("group")?;
            }
            c.groups = Groups::new(&ids[..n]);
            Some(c)
        }
        c => c,
    };
    let code = r.u8("operation")?;
    let op = OpCode::from_u8(code).ok_or(ProtoError::Op(code))?;
    let header = Header {
        tag,
        job,
        priority,
        creds,
        phase,
        elsewhere,
    };
    if shared && !(kind == Kind::Request as u8 && matches!(op, OpCode::Read | OpCode::Write)) {
        return Err(ProtoError::Invalid {
            field: "flags",
            reason: "the shared-region bit is for read and write requests only".into(),
        });
    }
    let frame = match kind {
        k if k == Kind::Request as u8 && shared => {
            Frame::Request(header, decode_shared(&mut r, op)?)
        }
        k if k == Kind::Request as u8 => Frame::Request(header, decode_request(&mut r, op)?),
        k if k == Kind::Response as u8 => Frame::Response(header, op, decode_response(&mut r)?),
        k => return Err(ProtoError::Kind(k)),
    };
    r.finish()?;
    Ok(frame)
}

/// A read or write whose data is in the shared region (flag bit 2).
fn decode_shared(r: &mut Reader, op: OpCode) -> Result<Request, ProtoError> {
    let path = r.str("path")?;
    let offset = r.u64("offset")?;
    let len = r.u32("length")?;
    let at = r.u64("region offset")?;
    Ok(if op == OpCode::Read {
        Request::ReadShared {
            path,
            offset,
            len,
            at,
        }
    } else {
        Request::WriteShared {
            path,
            offset,
            len,
            at,
        }
    })
}

/// A request that carries nothing but its path: the operations `encode_request`'s first arm
/// writes.
fn path_only(op: OpCode, path: String) -> Request {
    match op {
        OpCode::Lookup => Request::Lookup { path },
        OpCode::Fsync => Request::Fsync { path },
        OpCode::Unlink => Request::Unlink { path },
        OpCode::Rmdir => Request::Rmdir { path },
        OpCode::Readdir => Request::Readdir { path },
        OpCode::ReaddirPlus => Request::ReaddirPlus { path },
        OpCode::Lstat => Request::Lstat { path },
        OpCode::Readlink => Request::Readlink { path },
        other => unreachable!("{other:?} carries more than a path"),
    }
}

fn decode_request(r: &mut Reader, op: OpCode) -> Result<Request, ProtoError> {
    Ok(match op {
        OpCode::Lookup
        | OpCode::Fsync
        | OpCode::Unlink
        | OpCode::Rmdir
        | OpCode::Readdir
        | OpCode::ReaddirPlus
        | OpCode::Lstat
        | OpCode::Readlink => path_only(op, r.str("path")?),
        OpCode::Create => Request::Create {
            path: r.str("path")?,
            mode: r.u32("mode")?,
            exclusive: match r.u8("exclusive")? {
                0 => false,
                1 => true,
                v => {
                    return Err(ProtoError::Invalid {
                        field: "exclusive",
                        reason: format!("{v} is not 0 or 1"),
                    })
                }
            },
        },
        OpCode::Open => {
            let path = r.str("path")?;
            let flags = r.u32("open flags")?;
            if flags & !OpenFlags::ALL != 0 {
                return Err(ProtoError::Invalid {
                    field: "open flags",
                    reason: format!("unknown bits {:#x}", flags & !OpenFlags::ALL),
                });
            }
            Request::Open {
                path,
                flags: OpenFlags(flags),
            }
        }
        OpCode::Read => Request::Read {
            path: r.str("path")?,
            offset: r.u64("offset")?,
            len: r.u32("length")?,
        },
        OpCode::Write => Request::Write {
            path: r.str("path")?,
            offset: r.u64("offset")?,
            data: r.bulk("data")?,
        },
        OpCode::Truncate => Request::Truncate {
            path: r.str("path")?,
            size: r.u64("size")?,
        },
        OpCode::Mkdir => Request::Mkdir {
            path: r.str("path")?,
            mode: r.u32("mode")?,
        },
        OpCode::Rename => Request::Rename {
            from: r.str("from")?,
            to: r.str("to")?,
        },
        OpCode::Setattr => Request::Setattr {
            path: r.str("path")?,
            set: decode_setattr(r)?,
        },
        OpCode::Symlink => Request::Symlink {
            path: r.str("path")?,
            target: r.str("target")?,
        },
        OpCode::Mknod => Request::Mknod {
            path: r.str("path")?,
            mode: r.u32("mode")?,
            rdev: r.u64("rdev")?,
        },
        OpCode::Link => Request::Link {
            from: r.str("from")?,
            to: r.str("to")?,
        },
        OpCode::Statfs => Request::Statfs,
        OpCode::LocalTransport => Request::LocalTransport,
        OpCode::PhaseEnd => Request::PhaseEnd,
        OpCode::JobName => Request::JobName {
            name: r.str("job name")?,
        },
        OpCode::AttachRegion => Request::AttachRegion {
            len: r.u64("region length")?,
        },
        OpCode::Auth => Request::Auth {
            nonce: r.array("nonce")?,
            proof: r.array("proof")?,
        },
        OpCode::SetPriority
        | OpCode::ClearPriority
        | OpCode::Policy
        | OpCode::Jobs
        | OpCode::Stats
        | OpCode::RuleAdd
        | OpCode::RuleDel
        | OpCode::Rules
        | OpCode::ShareSet
        | OpCode::JobInfo
        | OpCode::Shares => {
            let token = r.str("token")?;
            let op = match op {
                OpCode::SetPriority => Control::SetPriority {
                    job: JobId(r.u64("job")?),
                    priority: r.priority("priority")?,
                },
                OpCode::ClearPriority => Control::ClearPriority {
                    job: JobId(r.u64("job")?),
                },
                OpCode::Policy => {
                    let name = r.str("policy name")?;
                    let n = r.u16("option count")?;
                    let mut options = Vec::new();
                    for _ in 0..n {
                        options.push((r.str("option key")?, r.str("option value")?));
                    }
                    Control::Policy { name, options }
                }
                OpCode::Jobs => Control::Jobs,
                OpCode::RuleAdd => {
                    let rule = r.str("rule")?;
                    let rank = r.u32("rule rank")?;
                    Control::RuleAdd {
                        rule,
                        rank: (rank != u32::MAX).then_some(rank),
                    }
                }
                OpCode::RuleDel => Control::RuleDel {
                    name: r.str("rule name")?,
                },
                OpCode::Rules => Control::Rules,
                OpCode::ShareSet => {
                    let node = r.str("share node")?;
                    let weight = r.f64("share weight")?;
                    Control::ShareSet {
                        node,
                        // Checked by the server, which names the node.
                        weight: (weight != 0.0).then_some(weight),
                    }
                }
                OpCode::JobInfo => {
                    let job = JobId(r.u64("job")?);
                    let account = r.str("account")?;
                    let nodes = r.u32("node count")?;
                    Control::JobInfo {
                        job,
                        account: (!account.is_empty()).then_some(account),
                        nodes: (nodes != 0).then_some(nodes),
                    }
                }
                OpCode::Shares => Control::Shares,
                _ => Control::Stats,
            };
            Request::Control { token, op }
        }
    })
}

fn decode_setattr(r: &mut Reader) -> Result<SetAttr, ProtoError> {
    let mask = r.u8("setattr mask")?;
    if mask & !SET_ALL != 0 {
        return Err(ProtoError::Invalid {
            field: "setattr mask",
            reason: format!("unknown bits {:#x}", mask & !SET_ALL),
        });
    }
    let on = |bit: u8| mask & bit != 0;
    let mut s = SetAttr::default();
    if on(SET_MODE) {
        s.mode = Some(r.u32("mode")?);
    }
    if on(SET_UID) {
        s.uid = Some(r.u32("uid")?);
    }
    if on(SET_GID) {
        s.gid = Some(r.u32("gid")?);
    }
    if on(SET_SIZE) {
        s.size = Some(r.u64("size")?);
    }
    let mut time = |field: &'static str| -> Result<SetTime, ProtoError> {
        match r.u8(field)? {
            TIME_NOW => Ok(SetTime::Now),
            TIME_AT => Ok(SetTime::At(r.i64(field)?)),
            t => Err(ProtoError::Invalid {
                field,
                reason: format!("unknown time tag {t}"),
            }),
        }
    };
    if on(SET_ATIME) {
        s.atime = Some(time("atime")?);
    }
    if on(SET_MTIME) {
        s.mtime = Some(time("mtime")?);
    }
    Ok(s)
}

fn decode_kind(r: &mut Reader, field: &'static str) -> Result<FileKind, ProtoError> {
    let k = r.u8(field)?;
    FileKind::from_u8(k).ok_or_else(|| ProtoError::Invalid {
        field,
        reason: format!("unknown kind {k}"),
    })
}

fn decode_attr(r: &mut Reader) -> Result<Attr, ProtoError> {
    Ok(Attr {
        kind: decode_kind(r, "file kind")?,
        size: r.u64("size")?,
        mode: r.u32("mode")?,
        mtime_ns: r.i64("mtime")?,
        atime_ns: r.i64("atime")?,
        ctime_ns: r.i64("ctime")?,
        ino: r.u64("ino")?,
        nlink: r.u32("nlink")?,
        uid: r.u32("uid")?,
        gid: r.u32("gid")?,
        rdev: r.u64("rdev")?,
        blocks: r.u64("blocks")?,
    })
}

fn decode_response(r: &mut Reader) -> Result<Response, ProtoError> {
    let status = r.i32("status")?;
    if status != 0 {
        if status < 0 {
            return Err(ProtoError::Invalid {
                field: "status",
                reason: format!("negative errno {status}"),
            });
        }
        return Ok(Response::Err {
            errno: status,
            message: r.str("message")?,
        });
    }
    let reply = match r.u8("reply kind")? {
        REPLY_ATTR => Reply::Attr(decode_attr(r)?),
        REPLY_ENTRY => Reply::Entry {
            attr: decode_attr(r)?,
            dir: decode_attr(r)?,
        },
        REPLY_REMOVED => Reply::Removed {
            dir: decode_attr(r)?,
        },
        REPLY_STATFS => Reply::Statfs(Statfs {
            blocks: r.u64("blocks")?,
            bfree: r.u64("bfree")?,
            bavail: r.u64("bavail")?,
            files: r.u64("files")?,
            ffree: r.u64("ffree")?,
            bsize: r.u32("bsize")?,
            namelen: r.u32("namelen")?,
            frsize: r.u32("frsize")?,
        }),
        REPLY_DATA => Reply::Data(r.bulk("data")?),
        REPLY_WRITTEN => Reply::Written(r.u32("written")?),
        REPLY_DONE => Reply::Done,
        REPLY_ENTRIES => {
            let n = entry_count(r, 11)?;
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                entries.push(decode_dir_entry(r)?);
            }
            Reply::Entries(entries)
        }
        REPLY_ENTRIES_PLUS => {
            let n = entry_count(r, 11 + ATTR_LEN)?;
            let mut entries = Vec::with_capacity(n);
            for _ in 0..n {
                let e = decode_dir_entry(r)?;
                entries.push((e, decode_attr(r)?));
            }
            Reply::EntriesPlus(entries)
        }
        REPLY_JSON => Reply::Json(r.text("report")?),
        REPLY_PLACED => Reply::Placed(r.u32("placed")?),
        REPLY_LOCAL => Reply::LocalTransport {
            socket: r.str("socket")?,
            id: r.str("server id")?,
            pid: r.u32("pid")?,
        },
        REPLY_ATTACHED => Reply::Attached {
            id: r.str("server id")?,
        },
        REPLY_CHALLENGE => Reply::Challenge {
            nonce: r.array("nonce")?,
        },
        REPLY_AUTHENTICATED => Reply::Authenticated {
            proof: r.array("proof")?,
        },
        k => {
            return Err(ProtoError::Invalid {
                field: "reply kind",
                reason: format!("unknown kind {k}"),
            })
        }
    };
    Ok(Response::Ok(reply))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_attribute_block_is_attr_len_bytes() {
        let mut w = Writer { buf: Vec::new() };
        encode_attr(
            &mut w,
            &Attr {
                kind: FileKind::File,
                size: 1,
                mode: 2,
                mtime_ns: 3,
                atime_ns: 4,
                ctime_ns: 5,
                ino: 6,
                nlink: 7,
                uid: 8,
                gid: 9,
                rdev: 10,
                blocks: 11,
            },
        );
        assert_eq!(w.buf.len(), ATTR_LEN);
    }

    fn roundtrip(f: Frame) {
        let enc = encode(&f).to_vec();
        let len = frame_len(enc[..4].try_into().unwrap(), u32::MAX).unwrap();
        assert_eq!(len, enc.len() - 4);
        assert_eq!(decode(Bytes::from(enc[4..].to_vec())).unwrap(), f);
    }

    #[test]
    fn write_and_read_reply_round_trip() {
        let h = Header {
            phase: Some(UnixNanos(1_764_000_000_123_456_789)),
            tag: 9,
            job: JobId(42),
            priority: Priority::new(0.1),
            creds: Some(Creds {
                uid: 1000,
                gid: 100,
                groups: Groups::new(&[100, 27, 1001]),
            }),
            elsewhere: Some(Elsewhere {
                ops: 17,
                bytes: 1 << 40,
            }),
        };
        roundtrip(Frame::Request(
            h,
            Request::Write {
                path: "a/b".into(),
                offset: 1 << 40,
                data: Bytes::from_static(b"hello"),
            },
        ));
        roundtrip(Frame::Response(
            h,
            OpCode::Read,
            Response::Ok(Reply::Data(Bytes::from_static(b"xyz"))),
        ));
        roundtrip(Frame::Response(
            h,
            OpCode::Unlink,
            Response::Err {
                errno: 2,
                message: "no such file".into(),
            },
        ));
    }

    #[test]
    fn oversized_length_is_refused_before_allocation() {
        let err = frame_len(1000u32.to_le_bytes(), 999).unwrap_err();
        assert_eq!(
            err,
            ProtoError::TooLarge {
                len: 1000,
                max: 999
            }
        );
        assert!(frame_len(*b"GET ", crate::DEFAULT_MAX_FRAME).is_err());
    }

    #[test]
    fn bad_version_and_op_are_errors() {
        let h = Header {
            phase: None,
            tag: 1,
            job: JobId(1),
            priority: None,
            creds: None,
            elsewhere: None,
        };
        let mut enc = encode(&Frame::Request(h, Request::Fsync { path: "f".into() })).to_vec();
        enc[4] = 1;
        assert_eq!(
            decode(Bytes::from(enc[4..].to_vec())),
            Err(ProtoError::Version(1))
        );
        enc[4] = VERSION;
        enc[4 + HEADER_LEN - 1] = 200;
        assert_eq!(
            decode(Bytes::from(enc[4..].to_vec())),
            Err(ProtoError::Op(200))
        );
    }

    #[test]
    fn supplementary_groups_are_bounded_and_need_credentials() {
        let h = Header {
            phase: None,
            tag: 1,
            job: JobId(1),
            priority: None,
            creds: Some(Creds {
                uid: 1000,
                gid: 100,
                groups: Groups::new(&[100, 27]),
            }),
            elsewhere: None,
        };
        let f = Frame::Request(h, Request::Lookup { path: "a".into() });
        let enc = encode(&f).head;
        assert_eq!(decode(Bytes::from(enc[4..].to_vec())).unwrap(), f);
        // The count byte sits where the operation would without groups.
        let at = 4 + HEADER_LEN - 1;
        assert_eq!(enc[at], 2);
        for bad in [0u8, 17] {
            let mut e = enc.clone();
            e[at] = bad;
            assert!(
                matches!(
                    decode(Bytes::from(e[4..].to_vec())),
                    Err(ProtoError::Invalid {
                        field: "group count",
                        ..
                    })
                ),
                "count {bad}"
            );
        }
        let mut e = enc.clone();
        e[6] &= !2; // flags' low byte: no credentials, groups still flagged
        assert!(matches!(
            decode(Bytes::from(e[4..].to_vec())),
            Err(ProtoError::Invalid { field: "flags", .. })
        ));
        // More than 16 groups: the first 16 travel.
        let many: Vec<u32> = (0..40).collect();
        assert_eq!(Groups::new(&many).as_slice(), &many[..Groups::MAX]);
    }

    #[test]
    fn the_shared_region_bit_is_for_reads_and_writes_only() {
        let h = Header {
            phase: None,
            tag: 1,
            job: JobId(1),
            priority: None,
            creds: None,
            elsewhere: None,
        };
        let shared = encode(&Frame::Request(
            h,
            Request::WriteShared {
                path: "f".into(),
                offset: 3,
                len: 4096,
                at: 8192,
            },
        ))
        .to_vec();
        assert_eq!(shared[6] & 4, 4, "flag bit 2 set");
        assert_eq!(shared[4 + HEADER_LEN - 1], OpCode::Write as u8);
        let mut fsync = encode(&Frame::Request(h, Request::Fsync { path: "f".into() })).to_vec();
        fsync[6] |= 4;
        assert!(matches!(
            decode(Bytes::from(fsync[4..].to_vec())),
            Err(ProtoError::Invalid { field: "flags", .. })
        ));
        let mut resp = encode(&Frame::Response(
            h,
            OpCode::Write,
            Response::Ok(Reply::Written(1)),
        ))
        .to_vec();
        resp[6] |= 4;
        assert!(decode(Bytes::from(resp[4..].to_vec())).is_err());
        // A shared write without its region offset is truncated.
        let n = shared.len();
        assert!(matches!(
            decode(Bytes::from(shared[4..n - 8].to_vec())),
            Err(ProtoError::Truncated { .. })
        ));
    }

    #[test]
    fn huge_entry_count_does_not_allocate() {
        let h = Header {
            phase: None,
            tag: 1,
            job: JobId(1),
            priority: None,
            creds: None,
            elsewhere: None,
        };
        let mut enc = encode(&Frame::Response(
            h,
            OpCode::Readdir,
            Response::Ok(Reply::Entries(vec![])),
        ))
        .to_vec();
        let n = enc.len();
        enc[n - 4..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode(Bytes::from(enc[4..].to_vec())),
            Err(ProtoError::Truncated { .. })
        ));
    }
}
