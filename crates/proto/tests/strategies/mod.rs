//! Proptest strategies for every message of the protocol: shared by the property tests
//! (`never_panics.rs`) and the fuzz seed corpus (`fuzz_corpus.rs`).

use iosets_proto::{
    Attr, Bytes, Control, Creds, DirEntry, Elsewhere, FileKind, Header, OpenFlags, Reply, Request,
    Response, SetAttr, SetTime, Statfs,
};
use iosets_types::{JobId, Priority};
use proptest::prelude::*;

fn path() -> impl Strategy<Value = String> {
    "[a-z0-9/._-]{0,40}"
}

pub fn header() -> impl Strategy<Value = Header> {
    (
        any::<u64>(),
        any::<u64>(),
        proptest::option::of(1e-6f64..1e6),
        proptest::option::of((
            any::<u32>(),
            any::<u32>(),
            proptest::collection::vec(any::<u32>(), 0..=iosets_proto::Groups::MAX),
        )),
        proptest::option::of(any::<u64>()),
        proptest::option::of((any::<u32>(), any::<u64>())),
    )
        .prop_map(|(tag, job, p, c, phase, e)| Header {
            phase: phase.map(iosets_types::UnixNanos),
            tag,
            job: JobId(job),
            priority: p.and_then(Priority::new),
            creds: c.map(|(uid, gid, groups)| Creds {
                uid,
                gid,
                groups: iosets_proto::Groups::new(&groups),
            }),
            elsewhere: e.map(|(ops, bytes)| Elsewhere { ops, bytes }),
        })
}

fn set_time() -> impl Strategy<Value = SetTime> {
    prop_oneof![Just(SetTime::Now), any::<i64>().prop_map(SetTime::At)]
}

fn set_attr() -> impl Strategy<Value = SetAttr> {
    (
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u32>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(set_time()),
        proptest::option::of(set_time()),
    )
        .prop_map(|(mode, uid, gid, size, atime, mtime)| SetAttr {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        })
}

pub fn request() -> impl Strategy<Value = Request> {
    prop_oneof![
        path().prop_map(|path| Request::Lookup { path }),
        (path(), any::<u32>(), any::<bool>()).prop_map(|(path, mode, exclusive)| {
            Request::Create {
                path,
                mode,
                exclusive,
            }
        }),
        (path(), 0u32..16).prop_map(|(path, f)| Request::Open {
            path,
            flags: OpenFlags(f)
        }),
        (path(), any::<u64>(), any::<u32>()).prop_map(|(path, offset, len)| Request::Read {
            path,
            offset,
            len
        }),
        (
            path(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|(path, offset, d)| Request::Write {
                path,
                offset,
                data: Bytes::from(d)
            }),
        path().prop_map(|path| Request::Fsync { path }),
        (path(), any::<u64>()).prop_map(|(path, size)| Request::Truncate { path, size }),
        path().prop_map(|path| Request::Unlink { path }),
        (path(), any::<u32>()).prop_map(|(path, mode)| Request::Mkdir { path, mode }),
        path().prop_map(|path| Request::Rmdir { path }),
        path().prop_map(|path| Request::Readdir { path }),
        path().prop_map(|path| Request::ReaddirPlus { path }),
        (path(), path()).prop_map(|(from, to)| Request::Rename { from, to }),
        path().prop_map(|path| Request::Lstat { path }),
        (path(), set_attr()).prop_map(|(path, set)| Request::Setattr { path, set }),
        (path(), path()).prop_map(|(path, target)| Request::Symlink { path, target }),
        path().prop_map(|path| Request::Readlink { path }),
        (path(), any::<u32>(), any::<u64>()).prop_map(|(path, mode, rdev)| Request::Mknod {
            path,
            mode,
            rdev
        }),
        (path(), path()).prop_map(|(from, to)| Request::Link { from, to }),
        Just(Request::Statfs),
        (path(), any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(path, offset, len, at)| {
            Request::ReadShared {
                path,
                offset,
                len,
                at,
            }
        }),
        (path(), any::<u64>(), any::<u32>(), any::<u64>()).prop_map(|(path, offset, len, at)| {
            Request::WriteShared {
                path,
                offset,
                len,
                at,
            }
        }),
        Just(Request::LocalTransport),
        any::<u64>().prop_map(|len| Request::AttachRegion { len }),
        (any::<[u8; 32]>(), any::<[u8; 32]>())
            .prop_map(|(nonce, proof)| Request::Auth { nonce, proof }),
        (".{0,10}", any::<u64>(), 1e-9f64..1e9).prop_map(|(token, job, p)| Request::Control {
            token,
            op: Control::SetPriority {
                job: JobId(job),
                priority: Priority::new(p).unwrap()
            }
        }),
        (".{0,10}", any::<u64>()).prop_map(|(token, job)| Request::Control {
            token,
            op: Control::ClearPriority { job: JobId(job) }
        }),
        (
            ".{0,10}",
            "[a-z]{1,8}",
            proptest::collection::vec(("[a-z.]{1,8}", "[0-9a-z]{0,8}"), 0..4)
        )
            .prop_map(|(token, name, options)| Request::Control {
                token,
                op: Control::Policy { name, options }
            }),
        ".{0,10}".prop_map(|token| Request::Control {
            token,
            op: Control::Jobs
        }),
        ".{0,10}".prop_map(|token| Request::Control {
            token,
            op: Control::Stats
        }),
        (
            ".{0,10}",
            "[a-z]{1,8}=[a-z0-9]{1,8}",
            proptest::option::of(1e-9f64..1e9)
        )
            .prop_map(|(token, node, weight)| Request::Control {
                token,
                op: Control::ShareSet { node, weight }
            }),
        (
            ".{0,10}",
            any::<u64>(),
            proptest::option::of("[a-z]{1,8}"),
            proptest::option::of(1u32..)
        )
            .prop_map(|(token, job, account, nodes)| Request::Control {
                token,
                op: Control::JobInfo {
                    job: JobId(job),
                    account,
                    nodes
                }
            }),
        ".{0,10}".prop_map(|token| Request::Control {
            token,
            op: Control::Shares
        }),
        ".{1,20}".prop_map(|name| Request::JobName { name }),
    ]
}

fn kind() -> impl Strategy<Value = FileKind> {
    prop_oneof![
        Just(FileKind::File),
        Just(FileKind::Dir),
        Just(FileKind::Symlink),
        Just(FileKind::Other),
        Just(FileKind::Fifo),
        Just(FileKind::Socket),
        Just(FileKind::CharDevice),
        Just(FileKind::BlockDevice)
    ]
}

/// Any attributes.
fn attr() -> impl Strategy<Value = Attr> {
    (
        (kind(), any::<u64>(), any::<u32>(), any::<i64>()),
        (any::<i64>(), any::<i64>(), any::<u64>(), any::<u32>()),
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<u64>()),
    )
        .prop_map(
            |(
                (kind, size, mode, mtime_ns),
                (atime_ns, ctime_ns, ino, nlink),
                (uid, gid, rdev, blocks),
            )| Attr {
                kind,
                size,
                mode,
                mtime_ns,
                atime_ns,
                ctime_ns,
                ino,
                nlink,
                uid,
                gid,
                rdev,
                blocks,
            },
        )
}

pub fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        attr().prop_map(|a| Response::Ok(Reply::Attr(a))),
        (attr(), attr()).prop_map(|(attr, dir)| Response::Ok(Reply::Entry { attr, dir })),
        attr().prop_map(|dir| Response::Ok(Reply::Removed { dir })),
        (
            proptest::array::uniform5(any::<u64>()),
            proptest::array::uniform3(any::<u32>())
        )
            .prop_map(|(u, v)| Response::Ok(Reply::Statfs(Statfs {
                blocks: u[0],
                bfree: u[1],
                bavail: u[2],
                files: u[3],
                ffree: u[4],
                bsize: v[0],
                namelen: v[1],
                frsize: v[2],
            }))),
        proptest::collection::vec(any::<u8>(), 0..300)
            .prop_map(|d| Response::Ok(Reply::Data(Bytes::from(d)))),
        any::<u32>().prop_map(|n| Response::Ok(Reply::Written(n))),
        Just(Response::Ok(Reply::Done)),
        proptest::collection::vec(("[a-z]{0,12}", kind(), any::<u64>()), 0..6).prop_map(|es| {
            Response::Ok(Reply::Entries(
                es.into_iter()
                    .map(|(name, kind, ino)| DirEntry { name, kind, ino })
                    .collect(),
            ))
        }),
        proptest::collection::vec(("[a-z]{0,12}", kind(), any::<u64>(), attr()), 0..4).prop_map(
            |es| {
                Response::Ok(Reply::EntriesPlus(
                    es.into_iter()
                        .map(|(name, kind, ino, a)| (DirEntry { name, kind, ino }, a))
                        .collect(),
                ))
            }
        ),
        ".{0,60}".prop_map(|s| Response::Ok(Reply::Json(s))),
        any::<u32>().prop_map(|n| Response::Ok(Reply::Placed(n))),
        (".{0,30}", ".{0,30}", any::<u32>())
            .prop_map(|(socket, id, pid)| Response::Ok(Reply::LocalTransport { socket, id, pid })),
        ".{0,30}".prop_map(|id| Response::Ok(Reply::Attached { id })),
        any::<[u8; 32]>().prop_map(|nonce| Response::Ok(Reply::Challenge { nonce })),
        any::<[u8; 32]>().prop_map(|proof| Response::Ok(Reply::Authenticated { proof })),
        (1i32..200, ".{0,30}").prop_map(|(errno, message)| Response::Err { errno, message }),
    ]
}
