//! Namespace changes and the server's open-file cache: two servers over one shared root (as in
//! front of one parallel file system) never write through a descriptor of a file that another
//! server unlinked or renamed, and a shutdown after renames and unlinks still fsyncs and succeeds.

use crate::common;

use common::{create, read, write, Conn, TempDir};
use iosets_proto::{Reply, Request};
use iosets_server::{Server, ServerConfig};

const ENOENT: i32 = 2;

#[test]
fn a_change_made_by_another_server_empties_the_cache() {
    let root = TempDir::new("shared-ns");
    let a = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let b = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut ca = Conn::connect(a.addr(), 1);
    let mut cb = Conn::connect(b.addr(), 1);
    ca.ok(create("f"));
    // Server B opens (and caches) f.
    assert!(matches!(
        cb.ok(write("f", 0, b"old".to_vec())),
        Reply::Written(3)
    ));
    // The client's unlink: the home server first, then the other, which finds it gone.
    ca.ok(Request::Unlink { path: "f".into() });
    let (errno, _) = cb.errno(Request::Unlink { path: "f".into() });
    assert_eq!(errno, ENOENT);
    // B must not write into the unlinked file any more.
    let (errno, _) = cb.errno(write("f", 0, b"lost".to_vec()));
    assert_eq!(
        errno, ENOENT,
        "a write to an unlinked path is refused, not acknowledged"
    );

    // Rename: B cached g; A renames g to h; B's rename fails; B's next write to g is refused and
    // h holds the data.
    ca.ok(create("g"));
    assert!(matches!(
        cb.ok(write("g", 0, b"data".to_vec())),
        Reply::Written(4)
    ));
    ca.ok(Request::Rename {
        from: "g".into(),
        to: "h".into(),
    });
    let (errno, _) = cb.errno(Request::Rename {
        from: "g".into(),
        to: "h".into(),
    });
    assert_eq!(errno, ENOENT);
    let (errno, _) = cb.errno(write("g", 4, b"more".to_vec()));
    assert_eq!(errno, ENOENT);
    match cb.ok(read("h", 0, 16)) {
        Reply::Data(d) => assert_eq!(&d[..], b"data"),
        r => panic!("{r:?}"),
    }
    // Open always looks at the file now at the path.
    ca.ok(create("f"));
    assert!(matches!(
        cb.ok(Request::Open {
            path: "f".into(),
            flags: iosets_proto::OpenFlags(iosets_proto::OpenFlags::WRITE),
        }),
        Reply::Attr(_)
    ));
    assert!(matches!(
        cb.ok(write("f", 0, b"new".to_vec())),
        Reply::Written(3)
    ));
    assert_eq!(std::fs::read(root.0.join("f")).unwrap(), b"new");
    assert!(a.shutdown().unwrap().balanced);
    assert!(b.shutdown().unwrap().balanced);
}

#[test]
fn shutdown_fsyncs_renamed_and_unlinked_files_and_succeeds() {
    let root = TempDir::new("fsync-ns");
    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    for name in ["keep", "moved", "gone"] {
        c.ok(create(name));
        c.ok(write(name, 0, name.as_bytes().to_vec()));
    }
    c.ok(Request::Rename {
        from: "moved".into(),
        to: "renamed".into(),
    });
    c.ok(Request::Unlink {
        path: "gone".into(),
    });
    let report = server
        .shutdown()
        .expect("a shutdown after renames and unlinks succeeds");
    // The unlinked file was closed at its unlink (its space freed), with nothing to make durable.
    assert_eq!(
        report.fsynced_files, 2,
        "every written file that still has a name, wherever it is now"
    );
    assert!(report.balanced);
    assert_eq!(std::fs::read(root.0.join("renamed")).unwrap(), b"moved");
    assert_eq!(std::fs::read(root.0.join("keep")).unwrap(), b"keep");
}

#[test]
fn set_id_bits_are_dropped_and_fifos_are_refused_without_hanging() {
    use std::os::unix::fs::PermissionsExt;
    let root = TempDir::new("modes");
    let fifo = root.0.join("pipe");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    c.ok(Request::Create {
        path: "suid".into(),
        mode: 0o4755,
        exclusive: true,
    });
    let mode = std::fs::metadata(root.0.join("suid"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(
        mode & 0o7000,
        0,
        "no setuid/setgid/sticky from a client: {mode:o}"
    );
    let (errno, msg) = c.errno(read("pipe", 0, 10));
    assert_eq!(errno, 22, "{msg}");
    assert!(msg.contains("not a regular file"), "{msg}");
    server.shutdown().unwrap();
}

/// A change of a directory's entries answers the directory's attributes right after it (the
/// client's kernel asks for them next): create and mkdir with the new entry's, unlink and
/// rmdir alone. They are the directory's as a stat of it then gives.
#[test]
fn entry_changes_answer_their_directory_after_the_change() {
    use std::os::unix::fs::MetadataExt;
    let root = TempDir::new("dir-after");
    let s = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(s.addr(), 1);
    std::fs::create_dir(root.0.join("d")).unwrap();
    let stat = |p: &str| std::fs::symlink_metadata(root.0.join(p)).unwrap();
    let same = |dir: &iosets_proto::Attr, p: &str, what: &str| {
        let m = stat(p);
        assert_eq!(dir.ino, m.ino(), "{what}: the directory {p}");
        assert_eq!(dir.nlink, m.nlink() as u32, "{what}: nlink");
        assert_eq!(dir.size, m.size(), "{what}: size");
        assert_eq!(
            dir.mtime_ns,
            m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            "{what}: mtime"
        );
        assert_eq!(
            dir.ctime_ns,
            m.ctime() * 1_000_000_000 + m.ctime_nsec(),
            "{what}: ctime"
        );
    };
    match c.ok(create("d/f")) {
        Reply::Entry { attr, dir } => {
            assert_eq!(attr.ino, stat("d/f").ino(), "create: the file");
            same(&dir, "d", "create");
        }
        r => panic!("create: {r:?}"),
    }
    let mkdir = Request::Mkdir {
        path: "d/e".into(),
        mode: 0o755,
    };
    match c.ok(mkdir) {
        Reply::Entry { attr, dir } => {
            assert_eq!(attr.ino, stat("d/e").ino(), "mkdir: the directory made");
            same(&dir, "d", "mkdir");
            assert_eq!(
                dir.nlink, 3,
                "mkdir: the parent counts the new subdirectory"
            );
        }
        r => panic!("mkdir: {r:?}"),
    }
    match c.ok(Request::Unlink { path: "d/f".into() }) {
        Reply::Removed { dir } => same(&dir, "d", "unlink"),
        r => panic!("unlink: {r:?}"),
    }
    match c.ok(Request::Rmdir { path: "d/e".into() }) {
        Reply::Removed { dir } => {
            same(&dir, "d", "rmdir");
            assert_eq!(dir.nlink, 2, "rmdir");
        }
        r => panic!("rmdir: {r:?}"),
    }
    // An entry of the root: the root's attributes.
    match c.ok(create("top")) {
        Reply::Entry { dir, .. } => same(&dir, ".", "create in the root"),
        r => panic!("create in the root: {r:?}"),
    }
    s.shutdown().unwrap();
}
