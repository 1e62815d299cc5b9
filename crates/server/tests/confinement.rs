//! No request reaches outside the root: `..`, absolute paths and symlinks leading out are refused.

use crate::common;

use common::{create, read, write, Conn, TempDir};
use iosets_proto::{OpenFlags, Reply, Request};
use iosets_server::{Server, ServerConfig};

const EACCES: i32 = 13;
const EXDEV: i32 = 18;

#[test]
fn every_traversal_attempt_is_refused() {
    let root = TempDir::new("root");
    let outside = TempDir::new("outside");
    std::fs::write(outside.0.join("secret"), b"do not read").unwrap();
    std::fs::create_dir(root.0.join("sub")).unwrap();
    std::os::unix::fs::symlink(&outside.0, root.0.join("sub/out")).unwrap();
    std::os::unix::fs::symlink(outside.0.join("secret"), root.0.join("leak")).unwrap();
    std::os::unix::fs::symlink("../..", root.0.join("sub/up")).unwrap();
    std::fs::write(root.0.join("inside"), b"fine").unwrap();
    std::os::unix::fs::symlink("inside", root.0.join("alias")).unwrap();

    let server = Server::start(ServerConfig::new(&root.0).with_insecure_loopback()).unwrap();
    let mut c = Conn::connect(server.addr(), 1);

    let secret = outside.0.join("secret").to_string_lossy().into_owned();
    // Absolute paths and `..` are refused before touching the file system.
    for path in [
        secret.as_str(),
        "/etc/passwd",
        "..",
        "../x",
        "sub/../../x",
        "sub/..",
    ] {
        let (errno, msg) = c.errno(read(path, 0, 10));
        assert_eq!(errno, EACCES, "{path}: {msg}");
        let (errno, _) = c.errno(Request::Lookup { path: path.into() });
        assert_eq!(errno, EACCES, "{path}");
        let (errno, _) = c.errno(create(path));
        assert_eq!(errno, EACCES, "{path}");
    }
    // Symlinks that lead out are refused by the kernel (RESOLVE_BENEATH).
    for path in ["leak", "sub/out/secret", "sub/up/etc/passwd"] {
        let (errno, msg) = c.errno(read(path, 0, 10));
        assert_eq!(errno, EXDEV, "{path}: {msg}");
        assert!(msg.contains("escapes"), "{msg}");
        let (errno, _) = c.errno(Request::Lookup { path: path.into() });
        assert_eq!(errno, EXDEV, "{path}");
        let (errno, _) = c.errno(write(path, 0, b"x".to_vec()));
        assert_eq!(errno, EXDEV, "{path}");
    }
    for req in [
        create("sub/out/planted"),
        Request::Mkdir {
            path: "sub/out/dir".into(),
            mode: 0o755,
        },
        Request::Unlink {
            path: "sub/out/secret".into(),
        },
        Request::Rename {
            from: "inside".into(),
            to: "sub/out/stolen".into(),
        },
        Request::Readdir {
            path: "sub/out".into(),
        },
        Request::Open {
            path: "leak".into(),
            flags: OpenFlags(OpenFlags::WRITE | OpenFlags::TRUNCATE),
        },
    ] {
        let (errno, _) = c.errno(req.clone());
        assert_eq!(errno, EXDEV, "{req:?}");
    }
    // Nothing outside changed, nothing was created there.
    assert_eq!(
        std::fs::read(outside.0.join("secret")).unwrap(),
        b"do not read"
    );
    assert_eq!(std::fs::read_dir(&outside.0).unwrap().count(), 1);
    // A symlink that stays inside the root works.
    match c.ok(read("alias", 0, 10)) {
        Reply::Data(d) => assert_eq!(&d[..], b"fine"),
        r => panic!("{r:?}"),
    }
    assert!(std::fs::read(root.0.join("inside")).unwrap() == b"fine");
    server.shutdown().unwrap();
}
