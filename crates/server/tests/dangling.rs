//! Issue 27 item 4: creating a name that is a dangling symbolic link. `create` of a link whose
//! target lies outside the root (and does not exist) answered success with the link's own
//! attributes. Now, as on Linux and never outside the root: an exclusive create, `mknod`,
//! `mkdir` and `symlink` of an existing name (a link, dangling or not) are `EEXIST`; a plain
//! create follows the link as `open(O_CREAT)` does, beneath the root: a target inside is kept
//! or created, a target outside is not followed (`EEXIST`), a loop is `ELOOP`.

use crate::common;

use std::path::Path;

use common::{create, Conn, TempDir};
use iosets_proto::{FileKind, OpenFlags, Reply, Request};
use iosets_server::{Server, ServerConfig};

const EEXIST: i32 = 17;
const ELOOP: i32 = 40;

fn exclusive(path: &str) -> Request {
    Request::Create {
        path: path.into(),
        mode: 0o644,
        exclusive: true,
    }
}

/// The ways a name can be made, each of which must leave an existing name alone.
fn makers(path: &str) -> Vec<Request> {
    vec![
        exclusive(path),
        Request::Mknod {
            path: path.into(),
            mode: 0o010644, // a FIFO
            rdev: 0,
        },
        Request::Mkdir {
            path: path.into(),
            mode: 0o755,
        },
        Request::Symlink {
            path: path.into(),
            target: "elsewhere".into(),
        },
    ]
}

fn is_link(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink())
}

#[test]
fn a_dangling_link_out_of_the_root_is_an_existing_name_never_followed() {
    let root = TempDir::new("dangling-root");
    let outside = TempDir::new("dangling-outside");
    std::fs::create_dir(root.0.join("sub")).unwrap();
    // Absolute, and relative climbing out of the root; neither target exists.
    std::os::unix::fs::symlink(outside.0.join("planted"), root.0.join("out")).unwrap();
    let up = format!(
        "../../{}/planted-too",
        outside.0.file_name().unwrap().to_str().unwrap()
    );
    std::os::unix::fs::symlink(&up, root.0.join("sub/up")).unwrap();
    assert!(
        !root.0.join("sub/up").exists(),
        "the relative link must dangle"
    );
    std::os::unix::fs::symlink("loop", root.0.join("loop")).unwrap();

    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    for name in ["out", "sub/up"] {
        // A plain create: the name exists and its link is not followed out of the root.
        let (errno, msg) = c.errno(create(name));
        assert_eq!(errno, EEXIST, "create {name}: {msg}");
        assert!(msg.contains("out of the server's root"), "{msg}");
        for req in makers(name) {
            let (errno, msg) = c.errno(req.clone());
            assert_eq!(errno, EEXIST, "{req:?}: {msg}");
        }
        // Opening it to create is refused too (the confinement's own errno).
        let (errno, _) = c.errno(Request::Open {
            path: name.into(),
            flags: OpenFlags(OpenFlags::CREATE | OpenFlags::WRITE),
        });
        assert_eq!(errno, 18, "open(O_CREAT) {name}: EXDEV");
        assert!(is_link(&root.0.join(name)), "{name} is still the link");
    }
    // A loop of links: ELOOP, as open(O_CREAT) answers; making the name: EEXIST.
    let (errno, msg) = c.errno(create("loop"));
    assert_eq!(errno, ELOOP, "{msg}");
    for req in makers("loop") {
        assert_eq!(c.errno(req.clone()).0, EEXIST, "{req:?}");
    }
    // Nothing was made outside.
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 0);
    assert!(server.shutdown().unwrap().balanced);
}

#[test]
fn a_dangling_link_inside_the_root_makes_its_target_as_open_o_creat_does() {
    let root = TempDir::new("dangling-inside");
    std::fs::create_dir(root.0.join("sub")).unwrap();
    std::fs::create_dir(root.0.join("data")).unwrap();
    std::os::unix::fs::symlink("target", root.0.join("inside")).unwrap();
    // Relative with `..`, staying beneath the root.
    std::os::unix::fs::symlink("../data/made", root.0.join("sub/deep")).unwrap();
    std::os::unix::fs::symlink("kept", root.0.join("alias")).unwrap();
    std::fs::write(root.0.join("kept"), b"12345").unwrap();
    std::os::unix::fs::symlink("never", root.0.join("excl")).unwrap();
    std::os::unix::fs::symlink("nodir/file", root.0.join("nowhere")).unwrap();

    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);
    // Exclusive, mknod, mkdir, symlink: the name exists; the target is not made.
    for req in makers("excl") {
        let (errno, msg) = c.errno(req.clone());
        assert_eq!(errno, EEXIST, "{req:?}: {msg}");
    }
    assert!(!root.0.join("never").exists());
    // A plain create makes the target and answers its attributes (a regular file).
    for (name, made) in [("inside", "target"), ("sub/deep", "data/made")] {
        let attr = match c.ok(create(name)) {
            Reply::Entry { attr, .. } => attr,
            r => panic!("{r:?}"),
        };
        let meta = std::fs::metadata(root.0.join(made)).unwrap();
        assert!(meta.is_file(), "{made} made");
        assert_eq!(attr.kind, FileKind::File);
        assert_eq!(attr.size, 0);
        assert_eq!(
            attr.ino,
            std::os::unix::fs::MetadataExt::ino(&meta),
            "{name}: the answer is the file made, not the link"
        );
        assert!(is_link(&root.0.join(name)), "{name} is still the link");
    }
    // A link to an existing file: the file is kept as it is, and its attributes answered.
    match c.ok(create("alias")) {
        Reply::Entry { attr: a, .. } => {
            assert_eq!((a.kind, a.size), (FileKind::File, 5));
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(std::fs::read(root.0.join("kept")).unwrap(), b"12345");
    // A target in a directory that does not exist: ENOENT, as open(O_CREAT) answers.
    assert_eq!(c.errno(create("nowhere")).0, 2);
    assert!(server.shutdown().unwrap().balanced);
}
