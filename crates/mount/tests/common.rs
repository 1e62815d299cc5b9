//! What the mount's tests share: whether FUSE can be used here, servers on loopback and a mount
//! of them, and the servers' job reports.

use std::path::Path;

use iosets_client::{Client, ClientConfig, Control, JobId, Reply};
use iosets_mount::{MountOptions, Mounted};
use iosets_proto::JobsReport;
use iosets_server::{Server, ServerConfig, ServerHandle};

/// Whether FUSE mounts can be made here (root and `/dev/fuse`); says so when not.
pub fn fuse_available() -> bool {
    let ok = Path::new("/dev/fuse").exists() && rustix::process::geteuid().is_root();
    if !ok {
        eprintln!("skipped: needs root and /dev/fuse");
    }
    ok
}

/// A server on loopback over `root` (made here unless another server's root already) with the
/// control token `token`; `tweak` adjusts its configuration.
pub fn server(root: &Path, token: &str, tweak: impl FnOnce(&mut ServerConfig)) -> ServerHandle {
    std::fs::create_dir_all(root).unwrap();
    let mut cfg = ServerConfig::new(root).with_insecure_loopback();
    cfg.token = Some(token.into());
    tweak(&mut cfg);
    Server::start(cfg).unwrap()
}

/// A mount of `servers` at `mnt` (made here) with the control token `token`; `tweak` adjusts
/// the options.
pub fn mount(
    mnt: &Path,
    servers: &[ServerHandle],
    token: &str,
    tweak: impl FnOnce(&mut MountOptions),
) -> Mounted {
    std::fs::create_dir(mnt).unwrap();
    let mut opts = MountOptions::new(mnt);
    opts.servers = servers.iter().map(|s| s.addr().to_string()).collect();
    opts.token = Some(token.into());
    tweak(&mut opts);
    iosets_mount::mount(opts).unwrap()
}

/// Every server's jobs report (`iosets ctl jobs`), in the servers' order.
pub fn jobs_reports(servers: &[ServerHandle], token: &str) -> Vec<JobsReport> {
    let addrs: Vec<_> = servers.iter().map(|s| s.addr()).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = Client::connect(&addrs, ClientConfig::new(JobId(0)))
            .await
            .unwrap();
        let mut out = Vec::new();
        for i in 0..addrs.len() {
            let Reply::Json(text) = c.control(i, token, Control::Jobs).await.unwrap() else {
                panic!("not a report")
            };
            out.push(serde_json::from_str(&text).unwrap());
        }
        out
    })
}
