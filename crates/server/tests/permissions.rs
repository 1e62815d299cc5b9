//! The server checks what a claimed user may do (issue 33 item 2): a request carrying a user's
//! credentials is done as that user, so owner/group/other bits, search permission on the path
//! and POSIX's chmod rules hold, whatever descriptor the server keeps, and however the path is
//! spelled (a symlink to the file). Root squash makes a claim of uid 0 act as `nobody`.
//!
//! The server must run as root to act as other users: the tests say so and pass without
//! checking anything when it does not (nothing to check: such a server is its own user only).

use crate::common;

use std::os::unix::fs::{chown, MetadataExt, PermissionsExt};
use std::path::Path;

use common::{Conn, TempDir};
use iosets_proto::{Bytes, Creds, Groups, OpenFlags, Reply, Request, SetAttr};
use iosets_server::{NoCreds, Server, ServerConfig};

const EACCES: i32 = 13;
const EPERM: i32 = 1;

/// User A owns the files; B is another user; both are unprivileged ids no test process uses.
const A: u32 = 50_001;
const B: u32 = 50_002;
/// A group B is in only when the test says so.
const G: u32 = 50_100;

/// A fresh directory holding [`tree`], or `None` (the test is skipped, as stderr says) when this
/// process is not root: the server must run as root to act as other users.
fn tree_as_root(name: &str) -> Option<TempDir> {
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: the server must run as root to act as other users (run as root)");
        return None;
    }
    let dir = TempDir::new(name);
    tree(&dir.0);
    Some(dir)
}

fn mode(path: &Path, m: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(m)).unwrap();
}

/// The tree, made directly on disk:
/// - `a/` (A, 0755) holding `secret` (A, 0600), `public` (A, 0644), `group` (A:G, 0640);
/// - `private/` (A, 0700) holding `open` (A, 0666);
/// - `tmp/` (1777) holding `link` → `../a/secret`.
fn tree(root: &Path) {
    let a = root.join("a");
    std::fs::create_dir(&a).unwrap();
    for (name, m, gid) in [
        ("secret", 0o600, A),
        ("public", 0o644, A),
        ("group", 0o640, G),
    ] {
        let p = a.join(name);
        std::fs::write(&p, format!("{name} of A")).unwrap();
        chown(&p, Some(A), Some(gid)).unwrap();
        mode(&p, m);
    }
    chown(&a, Some(A), Some(A)).unwrap();
    mode(&a, 0o755);
    let private = root.join("private");
    std::fs::create_dir(&private).unwrap();
    std::fs::write(private.join("open"), "open to all, in a closed directory").unwrap();
    chown(private.join("open"), Some(A), Some(A)).unwrap();
    mode(&private.join("open"), 0o666);
    chown(&private, Some(A), Some(A)).unwrap();
    mode(&private, 0o700);
    let tmp = root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    mode(&tmp, 0o1777);
    std::os::unix::fs::symlink("../a/secret", tmp.join("link")).unwrap();
}

fn start(root: &Path, squash: bool, no_creds: NoCreds) -> iosets_server::ServerHandle {
    let mut c = ServerConfig::new(root).with_insecure_loopback();
    c.policy = "timeorder".into();
    c.root_squash = squash;
    c.no_creds = no_creds;
    Server::start(c).unwrap()
}

fn as_user(addr: std::net::SocketAddr, creds: Option<Creds>) -> Conn {
    let mut c = Conn::connect(addr, 7);
    c.creds = creds;
    c
}

fn read(path: &str) -> Request {
    Request::Read {
        path: path.into(),
        offset: 0,
        len: 4096,
    }
}

fn write(path: &str) -> Request {
    Request::Write {
        path: path.into(),
        offset: 0,
        data: Bytes::from_static(b"overwritten"),
    }
}

fn open(path: &str, flags: u32) -> Request {
    Request::Open {
        path: path.into(),
        flags: OpenFlags(flags),
    }
}

fn refused(c: &mut Conn, req: Request, errno: i32) {
    let (e, message) = c.errno(req.clone());
    assert_eq!(e, errno, "{req:?}: {message}");
}

fn data(r: Reply) -> Vec<u8> {
    match r {
        Reply::Data(d) => d.to_vec(),
        other => panic!("not data: {other:?}"),
    }
}

/// Everything of `a/secret` and `a/` a refused request could have changed.
fn untouched(root: &Path) {
    let p = root.join("a/secret");
    assert_eq!(std::fs::read(&p).unwrap(), b"secret of A");
    let m = std::fs::metadata(&p).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o7777), (A, 0o600));
    let mut names: Vec<String> = std::fs::read_dir(root.join("a"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["group", "public", "secret"]);
}

#[test]
fn a_0600_file_of_one_user_is_refused_to_another_for_every_operation() {
    let Some(dir) = tree_as_root("perm-b") else {
        return;
    };
    let server = start(&dir.0, false, NoCreds::Server);
    // A reads its file first: the server then holds a descriptor of it, which B must not use.
    let mut a = as_user(server.addr(), Some(Creds::new(A, A)));
    assert_eq!(data(a.ok(read("a/secret"))), b"secret of A");
    let mut b = as_user(server.addr(), Some(Creds::new(B, B)));
    refused(&mut b, read("a/secret"), EACCES);
    refused(&mut b, write("a/secret"), EACCES);
    refused(&mut b, open("a/secret", OpenFlags::READ), EACCES);
    refused(&mut b, open("a/secret", OpenFlags::WRITE), EACCES);
    refused(
        &mut b,
        open("a/secret", OpenFlags::WRITE | OpenFlags::TRUNCATE),
        EACCES,
    );
    refused(
        &mut b,
        Request::Truncate {
            path: "a/secret".into(),
            size: 0,
        },
        EACCES,
    );
    refused(
        &mut b,
        Request::Unlink {
            path: "a/secret".into(),
        },
        EACCES,
    );
    refused(
        &mut b,
        Request::Rename {
            from: "a/secret".into(),
            to: "tmp/stolen".into(),
        },
        EACCES,
    );
    refused(
        &mut b,
        Request::Create {
            path: "a/new".into(),
            mode: 0o644,
            exclusive: true,
        },
        EACCES,
    );
    refused(
        &mut b,
        Request::Mkdir {
            path: "a/d".into(),
            mode: 0o755,
        },
        EACCES,
    );
    // Only the owner (or root) may chmod or chown.
    let chmod = SetAttr {
        mode: Some(0o666),
        ..SetAttr::default()
    };
    refused(
        &mut b,
        Request::Setattr {
            path: "a/secret".into(),
            set: chmod,
        },
        EPERM,
    );
    let chown_to_b = SetAttr {
        uid: Some(B),
        ..SetAttr::default()
    };
    refused(
        &mut b,
        Request::Setattr {
            path: "a/secret".into(),
            set: chown_to_b,
        },
        EPERM,
    );
    // Not through a symlink B may follow, nor through a directory B may not search.
    refused(&mut b, read("tmp/link"), EACCES);
    refused(&mut b, read("private/open"), EACCES);
    refused(&mut b, write("private/open"), EACCES);
    refused(
        &mut b,
        Request::Lookup {
            path: "private/open".into(),
        },
        EACCES,
    );
    refused(&mut b, read("a/../a/secret"), EACCES);
    untouched(&dir.0);
    assert_eq!(
        std::fs::read(dir.0.join("private/open")).unwrap(),
        b"open to all, in a closed directory"
    );
    // What the bits allow B still works: a world-readable file, a listing of a 0755 directory,
    // a file of its own in a sticky world-writable directory.
    assert_eq!(data(b.ok(read("a/public"))), b"public of A");
    refused(&mut b, write("a/public"), EACCES);
    match b.ok(Request::Readdir { path: "a".into() }) {
        Reply::Entries(e) => assert_eq!(e.len(), 3),
        other => panic!("{other:?}"),
    }
    b.ok(Request::Create {
        path: "tmp/mine".into(),
        mode: 0o600,
        exclusive: true,
    });
    let m = std::fs::metadata(dir.0.join("tmp/mine")).unwrap();
    assert_eq!((m.uid(), m.gid(), m.mode() & 0o777), (B, B, 0o600));
    b.ok(write("tmp/mine"));
    // The sticky bit: A may not remove B's file from tmp/ (Linux answers EPERM).
    refused(
        &mut a,
        Request::Unlink {
            path: "tmp/mine".into(),
        },
        EPERM,
    );
    // A, the owner, may do what B could not.
    a.ok(write("a/secret"));
    a.ok(Request::Setattr {
        path: "a/secret".into(),
        set: chmod,
    });
    assert_eq!(
        std::fs::metadata(dir.0.join("a/secret")).unwrap().mode() & 0o777,
        0o666
    );
}

#[test]
fn groups_travel_with_the_claim_and_the_owner_may_write_a_mode_0_file() {
    let Some(dir) = tree_as_root("perm-groups") else {
        return;
    };
    let server = start(&dir.0, false, NoCreds::Server);
    let mut outsider = as_user(server.addr(), Some(Creds::new(B, B)));
    refused(&mut outsider, read("a/group"), EACCES);
    let mut member = as_user(
        server.addr(),
        Some(Creds {
            uid: B,
            gid: B,
            groups: Groups::new(&[B, G]),
        }),
    );
    assert_eq!(data(member.ok(read("a/group"))), b"group of A");
    refused(&mut member, write("a/group"), EACCES);
    // NFS's owner override: the creator of a mode-0 file writes and reads it (as after
    // `open(O_CREAT | O_RDWR, 0)`), nobody else does.
    let mut owner = as_user(server.addr(), Some(Creds::new(B, B)));
    owner.ok(Request::Create {
        path: "tmp/zero".into(),
        mode: 0,
        exclusive: true,
    });
    assert_eq!(
        std::fs::metadata(dir.0.join("tmp/zero")).unwrap().mode() & 0o777,
        0
    );
    owner.ok(write("tmp/zero"));
    assert_eq!(data(owner.ok(read("tmp/zero"))), b"overwritten");
    let mut other = as_user(server.addr(), Some(Creds::new(A, A)));
    refused(&mut other, read("tmp/zero"), EACCES);
}

#[test]
fn root_squash_makes_a_claim_of_root_act_as_nobody() {
    let Some(dir) = tree_as_root("perm-squash") else {
        return;
    };
    // Without squash, root passes as in POSIX.
    let plain = start(&dir.0, false, NoCreds::Server);
    let mut root = as_user(plain.addr(), Some(Creds::new(0, 0)));
    assert_eq!(data(root.ok(read("a/secret"))), b"secret of A");
    assert_eq!(
        data(root.ok(read("private/open"))),
        b"open to all, in a closed directory"
    );
    drop(root);
    drop(plain);
    let squashed = start(&dir.0, true, NoCreds::Server);
    let mut root = as_user(squashed.addr(), Some(Creds::new(0, 0)));
    refused(&mut root, read("a/secret"), EACCES);
    refused(&mut root, write("a/secret"), EACCES);
    refused(
        &mut root,
        Request::Unlink {
            path: "a/secret".into(),
        },
        EACCES,
    );
    refused(
        &mut root,
        Request::Setattr {
            path: "a/secret".into(),
            set: SetAttr {
                uid: Some(0),
                ..SetAttr::default()
            },
        },
        EPERM,
    );
    untouched(&dir.0);
    // Squashed root is `nobody`: what others may do, it may.
    assert_eq!(data(root.ok(read("a/public"))), b"public of A");
    root.ok(Request::Create {
        path: "tmp/squashed".into(),
        mode: 0o644,
        exclusive: true,
    });
    let m = std::fs::metadata(dir.0.join("tmp/squashed")).unwrap();
    assert_eq!((m.uid(), m.gid()), (65534, 65534));
}

#[test]
fn requests_without_credentials_act_as_no_creds_says() {
    let Some(dir) = tree_as_root("perm-nocreds") else {
        return;
    };
    for (rule, readable) in [
        (NoCreds::Server, Ok(())),
        (NoCreds::Nobody, Err(EACCES)),
        (NoCreds::Refuse, Err(EACCES)),
    ] {
        let server = start(&dir.0, false, rule);
        let mut c = as_user(server.addr(), None);
        match readable {
            Ok(()) => assert_eq!(data(c.ok(read("a/secret"))), b"secret of A", "{rule}"),
            Err(errno) => refused(&mut c, read("a/secret"), errno),
        }
        // `nobody` may still read what everyone may; `refuse` refuses everything.
        match rule {
            NoCreds::Refuse => {
                let (e, message) = c.errno(read("a/public"));
                assert_eq!(e, EACCES);
                assert!(message.contains("no_creds"), "{message}");
            }
            _ => assert_eq!(data(c.ok(read("a/public"))), b"public of A", "{rule}"),
        }
    }
    untouched(&dir.0);
}
