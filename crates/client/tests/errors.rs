//! Errno codes travel back from the servers, and namespace operations reach every server.

use crate::common;

use std::io::ErrorKind;

use common::{addrs, runtime, servers, Scratch};
use iosets_client::{
    BlockingClient, Client, ClientConfig, ClientError, Control, FileKind, JobId, OpenFlags,
};

const ENOENT: i32 = 2;
const EEXIST: i32 = 17;

fn assert_errno(r: Result<impl std::fmt::Debug, ClientError>, errno: i32, kind: ErrorKind) {
    match r {
        Err(e @ ClientError::Errno { .. }) => {
            assert_eq!(e.errno(), Some(errno), "{e}");
            assert_eq!(e.kind(), kind, "{e}");
            assert_eq!(std::io::Error::from(e).raw_os_error(), Some(errno));
        }
        other => panic!("expected errno {errno}, got {other:?}"),
    }
}

#[test]
fn enoent_and_eexist_come_back_as_errno() {
    let scratch = Scratch::new("errors");
    let (handles, _) = servers(&scratch, 3, false);
    let client = BlockingClient::connect(&addrs(&handles), ClientConfig::new(JobId(1))).unwrap();
    assert_errno(client.lookup("missing"), ENOENT, ErrorKind::NotFound);
    assert_errno(
        client.read_at("missing", 0, 10),
        ENOENT,
        ErrorKind::NotFound,
    );
    assert_errno(
        client.write_at("missing", 0, vec![1u8; 10]),
        ENOENT,
        ErrorKind::NotFound,
    );
    assert_errno(client.unlink("missing"), ENOENT, ErrorKind::NotFound);
    assert_errno(client.rmdir("missing"), ENOENT, ErrorKind::NotFound);
    assert_errno(client.readdir("missing"), ENOENT, ErrorKind::NotFound);
    assert_errno(
        client.rename("missing", "other"),
        ENOENT,
        ErrorKind::NotFound,
    );
    assert_errno(
        client.open("missing", OpenFlags(OpenFlags::READ)),
        ENOENT,
        ErrorKind::NotFound,
    );

    client.create("f", 0o644, true).unwrap();
    assert_errno(
        client.create("f", 0o644, true),
        EEXIST,
        ErrorKind::AlreadyExists,
    );
    // Not exclusive: the existing file is kept.
    client.write_at("f", 0, b"hello".to_vec()).unwrap();
    assert_eq!(client.create("f", 0o644, false).unwrap().size, 5);
    client.mkdir("d", 0o755).unwrap();
    assert_errno(client.mkdir("d", 0o755), EEXIST, ErrorKind::AlreadyExists);
    drop(client);
    for h in handles {
        h.shutdown().unwrap();
    }
}

/// Namespace changes reach every server, so each root (separate roots) has the same tree.
#[test]
fn namespace_changes_reach_every_server() {
    let scratch = Scratch::new("namespace");
    let (handles, roots) = servers(&scratch, 3, false);
    let rt = runtime();
    rt.block_on(async {
        let client = Client::connect(&addrs(&handles), ClientConfig::new(JobId(2)))
            .await
            .unwrap();
        client.mkdir("a", 0o755).await.unwrap();
        client.mkdir("a/b", 0o755).await.unwrap();
        client
            .open("a/b/x", OpenFlags(OpenFlags::WRITE | OpenFlags::CREATE))
            .await
            .unwrap();
        client.create("a/y", 0o600, true).await.unwrap();
        for r in &roots {
            assert!(r.join("a/b/x").is_file() && r.join("a/y").is_file());
        }
        let names: Vec<(String, FileKind)> = client
            .readdir("/a")
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            vec![("b".into(), FileKind::Dir), ("y".into(), FileKind::File)]
        );
        client.rename("a/y", "a/z").await.unwrap();
        client.unlink("a/b/x").await.unwrap();
        client.rmdir("a/b").await.unwrap();
        for r in &roots {
            assert!(!r.join("a/y").exists() && r.join("a/z").is_file());
            assert!(!r.join("a/b").exists());
        }
        assert_eq!(client.lookup("a").await.unwrap().kind, FileKind::Dir);
        // Paths never leave the root, even before reaching a server.
        assert!(matches!(
            client.lookup("a/../../etc").await,
            Err(ClientError::InvalidPath { .. })
        ));
        // Control without the server's token is refused with an errno.
        let refused = client.control(0, "wrong", Control::Stats).await;
        assert!(
            matches!(refused, Err(ClientError::Errno { .. })),
            "{refused:?}"
        );
        assert!(matches!(
            client.control(3, "t", Control::Stats).await,
            Err(ClientError::Config(_))
        ));
    });
    drop(rt);
    for h in handles {
        h.shutdown().unwrap();
    }
}
