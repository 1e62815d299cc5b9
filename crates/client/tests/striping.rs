//! Data written through the client at random offsets and sizes reads back identical, over 1 and
//! 3 servers, and the servers' backing files hold exactly the layout's chunks.

use crate::common;

use std::path::PathBuf;

use common::{addrs, runtime, servers, Scratch};
use iosets_client::{BlockingClient, Client, ClientConfig, JobId, Layout};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Small chunks, so that a few hundred KiB span many chunks and every server.
const CHUNK: u64 = 16 * 1024;
/// The largest file the random operations make.
const MAX_FILE: u64 = 600 * 1024;
const PATH: &str = "dir/data.bin";

fn config() -> ClientConfig {
    let mut c = ClientConfig::new(JobId(7));
    c.chunk_size = CHUNK;
    c
}

/// One random operation: a write (`Some(data)`) or a read of `len` bytes, at `offset`.
struct Op {
    offset: u64,
    len: usize,
    write: Option<Vec<u8>>,
}

fn ops(seed: u64, count: usize) -> Vec<Op> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..count)
        .map(|_| {
            let offset = rng.gen_range(0..MAX_FILE - 1);
            // Sizes from 1 byte to several chunks, biased to cross chunk boundaries.
            let len = match rng.gen_range(0..3) {
                0 => rng.gen_range(1..64),
                1 => rng.gen_range(1..2 * CHUNK as usize),
                _ => rng.gen_range(1..6 * CHUNK as usize),
            };
            let len = len.min((MAX_FILE - offset) as usize);
            let write = rng.gen_bool(0.5).then(|| {
                let mut d = vec![0u8; len];
                rng.fill(&mut d[..]);
                d
            });
            Op { offset, len, write }
        })
        .collect()
}

/// What a read of `[offset, offset + len)` must return given the file's contents `model`.
fn expected(model: &[u8], offset: u64, len: usize) -> &[u8] {
    let start = (offset as usize).min(model.len());
    let end = (offset as usize + len).min(model.len());
    &model[start..end]
}

fn apply(model: &mut Vec<u8>, offset: u64, data: &[u8]) {
    let end = offset as usize + data.len();
    if model.len() < end {
        model.resize(end, 0);
    }
    model[offset as usize..end].copy_from_slice(data);
}

/// Checks the backing files against `model`: with a shared root the file is the model; with
/// separate roots, server `s`'s file holds the model's bytes in the chunks the layout gives it
/// and zeros (or nothing) elsewhere.
fn check_backing(roots: &[PathBuf], shared: bool, layout: Layout, model: &[u8]) {
    if shared {
        let on_disk = std::fs::read(roots[0].join(PATH)).unwrap();
        assert!(
            on_disk == model,
            "shared backing file differs from the data written"
        );
        return;
    }
    let files: Vec<Vec<u8>> = roots
        .iter()
        .map(|r| std::fs::read(r.join(PATH)).unwrap())
        .collect();
    for (s, f) in files.iter().enumerate() {
        assert!(
            f.len() <= model.len(),
            "server {s}'s file is longer than the logical file"
        );
    }
    let chunks = (model.len() as u64).div_ceil(CHUNK);
    for k in 0..chunks {
        let start = (k * CHUNK) as usize;
        let end = ((k + 1) * CHUNK).min(model.len() as u64) as usize;
        let owner = layout.server_of(PATH, k);
        for (s, f) in files.iter().enumerate() {
            let have: Vec<u8> = (start..end)
                .map(|i| f.get(i).copied().unwrap_or(0))
                .collect();
            if s == owner {
                assert!(
                    have == model[start..end],
                    "chunk {k} differs on its server {s}"
                );
            } else {
                assert!(
                    have.iter().all(|&b| b == 0),
                    "chunk {k} has data on server {s}, which does not own it"
                );
            }
        }
    }
}

/// Runs the random operations through the async client and checks everything.
fn random_ops_async(n: usize, shared: bool, seed: u64) {
    let scratch = Scratch::new(&format!("striping-{n}-{shared}"));
    let (handles, roots) = servers(&scratch, n, shared);
    let rt = runtime();
    let model = rt.block_on(async {
        let client = Client::connect(&addrs(&handles), config()).await.unwrap();
        assert_eq!(client.layout().servers(), n);
        client.mkdir("dir", 0o755).await.unwrap();
        client.create(PATH, 0o644, true).await.unwrap();
        let mut model = Vec::new();
        for (i, op) in ops(seed, 300).into_iter().enumerate() {
            match op.write {
                Some(data) => {
                    let written = client
                        .write_at(PATH, op.offset, data.clone())
                        .await
                        .unwrap();
                    assert_eq!(written, data.len() as u64);
                    apply(&mut model, op.offset, &data);
                }
                None => {
                    let got = client.read_at(PATH, op.offset, op.len).await.unwrap();
                    assert!(
                        got[..] == *expected(&model, op.offset, op.len),
                        "op {i}: read of {} at {} differs ({} bytes back)",
                        op.len,
                        op.offset,
                        got.len()
                    );
                }
            }
        }
        assert_eq!(client.lookup(PATH).await.unwrap().size, model.len() as u64);
        // The whole file, and past its end.
        let all = client
            .read_at(PATH, 0, MAX_FILE as usize + 100)
            .await
            .unwrap();
        assert!(all[..] == model[..], "whole-file read differs");
        assert!(client
            .read_at(PATH, model.len() as u64 + 5, 10)
            .await
            .unwrap()
            .is_empty());
        client.fsync(PATH).await.unwrap();
        model
    });
    drop(rt);
    let layout = Layout::new(CHUNK, n).unwrap();
    for h in handles {
        h.shutdown().unwrap();
    }
    check_backing(&roots, shared, layout, &model);
}

#[test]
fn three_servers_separate_roots() {
    random_ops_async(3, false, 1);
}

#[test]
fn three_servers_shared_root() {
    random_ops_async(3, true, 2);
}

/// The blocking client over one server: the same operations and checks.
#[test]
fn one_server_blocking_client() {
    let scratch = Scratch::new("striping-1");
    let (handles, roots) = servers(&scratch, 1, false);
    let client = BlockingClient::connect(&addrs(&handles), config()).unwrap();
    client.mkdir("/dir/", 0o755).unwrap();
    client.create(PATH, 0o644, false).unwrap();
    let mut model = Vec::new();
    for (i, op) in ops(3, 300).into_iter().enumerate() {
        match op.write {
            Some(data) => {
                client.write_at(PATH, op.offset, data.clone()).unwrap();
                apply(&mut model, op.offset, &data);
            }
            None => {
                let got = client.read_at(PATH, op.offset, op.len).unwrap();
                assert!(
                    got[..] == *expected(&model, op.offset, op.len),
                    "op {i}: read differs"
                );
            }
        }
    }
    assert_eq!(client.lookup(PATH).unwrap().size, model.len() as u64);
    client.fsync(PATH).unwrap();
    drop(client);
    for h in handles {
        h.shutdown().unwrap();
    }
    check_backing(&roots, false, Layout::new(CHUNK, 1).unwrap(), &model);
}

/// Sizes follow truncation on every server, and a hole left by a sparse write reads as zeros.
#[test]
fn truncate_and_holes_over_three_separate_roots() {
    let scratch = Scratch::new("truncate");
    let (handles, _roots) = servers(&scratch, 3, false);
    let rt = runtime();
    rt.block_on(async {
        let client = Client::connect(&addrs(&handles), config()).await.unwrap();
        client.create("f", 0o644, false).await.unwrap();
        // One byte far out: every chunk before it is a hole.
        client
            .write_at("f", 5 * CHUNK + 3, vec![9u8])
            .await
            .unwrap();
        assert_eq!(client.lookup("f").await.unwrap().size, 5 * CHUNK + 4);
        let all = client.read_at("f", 0, 10 * CHUNK as usize).await.unwrap();
        assert_eq!(all.len() as u64, 5 * CHUNK + 4);
        assert!(all[..all.len() - 1].iter().all(|&b| b == 0));
        assert_eq!(all[all.len() - 1], 9);
        client.truncate("f", 2 * CHUNK + 1).await.unwrap();
        assert_eq!(client.lookup("f").await.unwrap().size, 2 * CHUNK + 1);
        client.truncate("f", 7 * CHUNK).await.unwrap();
        assert_eq!(client.lookup("f").await.unwrap().size, 7 * CHUNK);
        let all = client.read_at("f", 0, 10 * CHUNK as usize).await.unwrap();
        assert_eq!(all.len() as u64, 7 * CHUNK);
        assert!(all.iter().all(|&b| b == 0));
    });
    drop(rt);
    for h in handles {
        h.shutdown().unwrap();
    }
}
