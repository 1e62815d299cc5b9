//! Only trusted clients reach a server (issue 33, item 1), tried with a real second user: a
//! child process run as `nobody` (`setpriv --reuid=65534 --regid=65534 --clear-groups`) that
//! speaks the wire protocol, raw and through the client library, to a server started the
//! default way, and to the embedded server of `iosets mount --local`.
//!
//! The child is this test binary again, running [`as_nobody_probe`] (ignored in normal runs):
//! it prints one `key=outcome` line per attempt, and the parent judges them. The tests need
//! root (to make the second user) and skip, saying so, when `nobody` cannot be used.

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{frame, iosets, node_secret_path, recv, scratch, spawn_server, stdout};
use iosets_proto::io::ReadError;
use iosets_proto::{encode, Creds, Frame, Header, Reply, Request, Response};
use iosets_types::JobId;

const NOBODY: u32 = 65534;
const PRIVATE: &[u8] = b"root's private data\n";

/// Whether a child can run as `nobody`; says why not when it cannot.
fn nobody_usable() -> bool {
    if !rustix::process::geteuid().is_root() {
        eprintln!("SKIPPED: not root, so no second user can be made (run the tests as root)");
        return false;
    }
    let ok = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: `setpriv --reuid=65534 ... true` failed: user nobody cannot be used");
    }
    ok
}

/// Runs [`as_nobody_probe`] as `nobody` with `env`; returns its `key=value` lines.
fn probe_as_nobody(env: &[(&str, String)]) -> BTreeMap<String, String> {
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new("setpriv");
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(me)
        .args([
            "--exact",
            "as_nobody_probe",
            "--include-ignored",
            "--nocapture",
        ])
        .args(["--test-threads", "1"])
        .env_remove("IOSETS_AUTH_FILE")
        .env("IOSETS_PROBE", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the probe failed: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: BTreeMap<String, String> = text
        .lines()
        // The harness may print the test's name on the same line first.
        .filter_map(|l| l.split_once("PROBE ").map(|(_, kv)| kv))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(lines.get("uid"), Some(&NOBODY.to_string()), "{text}");
    lines
}

/// What the server answered `req` sent raw over `s`: `data:N`, `ok`, `errno:E` or `closed`.
fn outcome(s: &mut TcpStream, tag: u64, bytes: &[u8]) -> String {
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    if s.write_all(bytes).is_err() {
        return "closed".into();
    }
    let mut answer = recv(s);
    // A server with a secret speaks first: its challenge, which this client cannot answer.
    while let Some((0, Response::Ok(Reply::Challenge { .. }))) = answer {
        answer = recv(s);
    }
    match answer {
        Some((t, Response::Ok(Reply::Data(d)))) if t == tag => format!("data:{}", d.len()),
        Some((t, Response::Ok(_))) if t == tag => "ok".into(),
        Some((_, Response::Err { errno, .. })) => format!("errno:{errno}"),
        Some(_) => "other".into(),
        None => "closed".into(),
    }
}

/// A request claiming `creds` (the raw client's header is its own to fill in).
fn claiming(tag: u64, creds: Option<Creds>, req: Request) -> Vec<u8> {
    let h = Header {
        creds,
        ..Header::new(tag, JobId(7))
    };
    encode(&Frame::Request(h, req)).to_vec()
}

/// The hostile local user: run only as the child of the tests below (as `nobody`).
#[test]
#[ignore = "run as `nobody` by the tests of this file"]
fn as_nobody_probe() {
    if std::env::var_os("IOSETS_PROBE").is_none() {
        return;
    }
    println!("PROBE uid={}", rustix::process::getuid().as_raw());
    let root_creds = Some(Creds::new(0, 0));
    if let Ok(addr) = std::env::var("PROBE_TCP") {
        // Raw frames, no credentials; then claiming root.
        let read = Request::Read {
            path: "private".into(),
            offset: 0,
            len: 64,
        };
        let write = Request::Write {
            path: "private".into(),
            offset: 0,
            data: b"overwritten by nobody".to_vec().into(),
        };
        for (key, bytes) in [
            ("raw_read", frame(1, 7, read.clone())),
            ("raw_write", frame(1, 7, write.clone())),
            ("raw_read_as_root", claiming(1, root_creds, read)),
            ("raw_write_as_root", claiming(1, root_creds, write)),
        ] {
            let r = match TcpStream::connect(&addr) {
                Ok(mut s) => outcome(&mut s, 1, &bytes),
                Err(e) => format!("connect:{}", e.raw_os_error().unwrap_or(0)),
            };
            println!("PROBE {key}={r}");
        }
        // The project's client library, the way a tool would: the node's secret first.
        let secret = iosets_client::ClientConfig::auth_default();
        println!(
            "PROBE secret={}",
            match &secret {
                Ok(Some(_)) => "read".to_string(),
                Ok(None) => "none".to_string(),
                Err(e) if e.to_string().contains("Permission denied") => "denied".to_string(),
                Err(e) => format!("error:{e}"),
            }
        );
        let mut cfg = iosets_client::ClientConfig::new(JobId(7));
        cfg.retries = 0;
        cfg.auth = secret.ok().flatten();
        let lib = iosets_client::BlockingClient::connect_to(&[addr.as_str()], cfg)
            .and_then(|c| c.read_at("private", 0, 64));
        println!(
            "PROBE lib_read={}",
            match lib {
                Ok(d) => format!("data:{}", d.len()),
                Err(iosets_client::ClientError::Errno { errno, .. }) => format!("errno:{errno}"),
                Err(e) => format!("error:{e}"),
            }
        );
    }
    if let Ok(pid) = std::env::var("PROBE_UNIX_OF") {
        // The server's same-host socket, found the way any user can: /proc/net/unix.
        let names = abstract_sockets(&format!("@iosets-{pid}-"));
        println!("PROBE unix_sockets={}", names.len());
        for name in names {
            use std::os::linux::net::SocketAddrExt;
            let a =
                std::os::unix::net::SocketAddr::from_abstract_name(&name.as_bytes()[1..]).unwrap();
            let r = match std::os::unix::net::UnixStream::connect_addr(&a) {
                Err(e) => format!("connect:{}", e.raw_os_error().unwrap_or(0)),
                Ok(mut s) => {
                    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    let req = Request::Read {
                        path: "private".into(),
                        offset: 0,
                        len: 64,
                    };
                    let _ = s.write_all(&claiming(1, root_creds, req));
                    answer_of(&mut s)
                }
            };
            println!("PROBE unix_read_as_root={r}");
        }
    }
    if let Ok(list) = std::env::var("PROBE_PORTS") {
        for port in list.split(',').filter(|p| !p.is_empty()) {
            let r = match TcpStream::connect(("127.0.0.1", port.parse::<u16>().unwrap())) {
                Ok(_) => "connected".to_string(),
                Err(e) => format!("connect:{}", e.raw_os_error().unwrap_or(0)),
            };
            println!("PROBE port_{port}={r}");
        }
    }
}

/// The answers on a same-host socket: every frame until the server closes it (a challenge
/// first when it has a secret); the last one decides.
fn answer_of(s: &mut std::os::unix::net::UnixStream) -> String {
    let mut last = "closed".to_string();
    loop {
        let frame = match iosets_proto::io::read_frame_blocking(s, 1 << 20) {
            Ok(frame) => frame,
            Err(ReadError::Protocol(_)) => return "garbage".into(),
            Err(_) => return last,
        };
        last = match frame {
            Frame::Response(_, _, Response::Ok(Reply::Challenge { .. })) => "challenged".into(),
            Frame::Response(_, _, Response::Ok(Reply::Data(d))) => format!("data:{}", d.len()),
            Frame::Response(_, _, Response::Err { errno, .. }) => format!("errno:{errno}"),
            _ => "other".into(),
        };
    }
}

/// Abstract Unix sockets whose name starts with `prefix` (`@…`), from /proc/net/unix.
fn abstract_sockets(prefix: &str) -> Vec<String> {
    let text = std::fs::read_to_string("/proc/net/unix").unwrap();
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| l.split_whitespace().nth(7))
        .filter(|n| n.starts_with(prefix))
        .map(str::to_string)
        .collect();
    v.sort();
    v.dedup();
    v
}

/// The socket inodes process `pid` holds.
fn socket_inodes(pid: u32) -> Vec<u64> {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|l| {
            let l = l.to_string_lossy().into_owned();
            l.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
        })
        .collect()
}

/// The TCP ports process `pid` listens on (IPv4 and IPv6), from /proc/net/tcp{,6}.
fn listening_tcp_ports(pid: u32) -> Vec<u16> {
    let mine = socket_inodes(pid);
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for l in text.lines().skip(1) {
            let f: Vec<&str> = l.split_whitespace().collect();
            // local_address, state (0A: LISTEN), inode.
            let (Some(local), Some(&"0A"), Some(inode)) = (f.get(1), f.get(3), f.get(9)) else {
                continue;
            };
            if inode.parse::<u64>().is_ok_and(|i| mine.contains(&i)) {
                let port = local.rsplit(':').next().unwrap();
                ports.push(u16::from_str_radix(port, 16).unwrap());
            }
        }
    }
    ports.sort_unstable();
    ports
}

/// The listening Unix sockets process `pid` holds (flag `__SO_ACCEPTCON` in /proc/net/unix).
fn listening_unix(pid: u32) -> Vec<String> {
    let mine = socket_inodes(pid);
    let text = std::fs::read_to_string("/proc/net/unix").unwrap();
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let flags = u32::from_str_radix(f.get(3)?, 16).ok()?;
            let inode: u64 = f.get(6)?.parse().ok()?;
            (flags & 0x10000 != 0 && mine.contains(&inode))
                .then(|| f.get(7).map_or("(unnamed)".to_string(), |n| n.to_string()))
        })
        .collect()
}

/// `iosets serve` started the default way (no --auth-file, no --insecure-loopback), its
/// default secret in `dir` (through IOSETS_AUTH_FILE, so that the test leaves /etc alone), its
/// log in `dir/serve.log`. Returns the child, its address, and its admin address.
fn default_server(dir: &Path) -> (Child, String, String) {
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    std::fs::write(dir.join("tok"), "t\n").unwrap();
    let (child, line) = spawn_server(
        Command::new(env!("CARGO_BIN_EXE_iosets"))
            .current_dir(dir)
            .args(["serve", "--root", "r", "--listen", "127.0.0.1:0"])
            .args(["--token-file", "tok"])
            .env("IOSETS_AUTH_FILE", node_secret_path(dir))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log),
    );
    let word_after = |key: &str| {
        common::word_after(&line, key)
            .trim_end_matches(')')
            .to_string()
    };
    let addr = word_after("listening on ");
    let admin = word_after("metrics at http://").replace("/metrics", "");
    assert!(
        line.contains(&format!(
            "by cluster secret made now in {}",
            node_secret_path(dir).display()
        )),
        "{line}"
    );
    (child, addr, admin)
}

fn metric(admin: &str, name: &str) -> f64 {
    let mut s = TcpStream::connect(admin).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse().ok())
        .unwrap_or(0.0)
}

fn stop(mut child: Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status();
    let end = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn an_unprivileged_local_user_is_refused_by_a_default_server() {
    if !nobody_usable() {
        return;
    }
    let dir = scratch("trust-default");
    // `nobody` may walk to the test's files (to run the probe), not read the root's.
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("r")).unwrap();
    std::fs::write(dir.join("r/private"), PRIVATE).unwrap();
    std::fs::set_permissions(
        dir.join("r/private"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let (child, addr, admin) = default_server(&dir);
    // The easy path made the node's secret: root's, mode 0600.
    let meta = std::fs::metadata(node_secret_path(&dir)).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    assert_eq!(std::os::unix::fs::MetadataExt::uid(&meta), 0);
    // Root's tools on the node find it without a flag.
    let o = iosets(
        &dir,
        &["ctl", "--server", &addr, "--token-file", "tok", "stats"],
    );
    assert!(o.status.success(), "{o:?}");
    assert!(
        stdout(&o).contains("balance           ok"),
        "{}",
        stdout(&o)
    );

    let pid = child.id().to_string();
    let seen = probe_as_nobody(&[
        ("PROBE_TCP", addr.clone()),
        ("PROBE_UNIX_OF", pid),
        (
            "IOSETS_AUTH_FILE",
            node_secret_path(&dir).display().to_string(),
        ),
    ]);
    eprintln!("nobody against the default server: {seen:?}");
    let eacces = format!("errno:{}", libc_eacces());
    for key in [
        "raw_read",
        "raw_write",
        "raw_read_as_root",
        "raw_write_as_root",
    ] {
        assert_eq!(seen.get(key), Some(&eacces), "{key}: {seen:?}");
    }
    // The secret is there, but not for nobody; without it the library is refused too.
    assert_eq!(seen.get("secret").map(String::as_str), Some("denied"));
    assert_eq!(seen.get("lib_read"), Some(&eacces), "{seen:?}");
    // The same-host socket asks nobody for the proof it cannot give.
    assert_eq!(seen.get("unix_sockets").map(String::as_str), Some("1"));
    assert_eq!(seen.get("unix_read_as_root"), Some(&eacces), "{seen:?}");
    // Refused, counted and logged; nothing read or written.
    assert!(metric(&admin, "iosets_refusals_total{reason=\"auth_missing\"}") >= 6.0);
    assert_eq!(std::fs::read(dir.join("r/private")).unwrap(), PRIVATE);
    stop(child);
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(
        log.contains("refusal=\"auth_missing\"") || log.contains("refusal=auth_missing"),
        "{log}"
    );
    assert!(log.contains("requires authentication"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn insecure_loopback_says_any_local_user_can_act_as_any_user() {
    if !nobody_usable() {
        return;
    }
    let dir = scratch("trust-insecure");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::create_dir_all(dir.join("r")).unwrap();
    let log = std::fs::File::create(dir.join("serve.log")).unwrap();
    let (child, line) = spawn_server(
        Command::new(env!("CARGO_BIN_EXE_iosets"))
            .current_dir(&dir)
            .args(["serve", "--root", "r", "--listen", "127.0.0.1:0"])
            .arg("--insecure-loopback")
            .env("IOSETS_AUTH_FILE", node_secret_path(&dir))
            .env("RUST_LOG", "info")
            .stdout(Stdio::piped())
            .stderr(log),
    );
    assert!(
        line.contains("any local user can act as any user"),
        "{line}"
    );
    let addr = common::word_after(&line, "listening on ");
    // What the flag means, shown: nobody, claiming root, writes a root file.
    std::fs::write(dir.join("r/private"), PRIVATE).unwrap();
    std::fs::set_permissions(
        dir.join("r/private"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    let seen = probe_as_nobody(&[("PROBE_TCP", addr)]);
    eprintln!("nobody against --insecure-loopback: {seen:?}");
    assert_eq!(
        seen.get("raw_read").map(String::as_str),
        Some(format!("data:{}", PRIVATE.len()).as_str())
    );
    for key in ["raw_write", "raw_write_as_root"] {
        assert_eq!(
            seen.get(key).map(String::as_str),
            Some("ok"),
            "{key}: {seen:?}"
        );
    }
    assert_eq!(
        std::fs::read(dir.join("r/private")).unwrap(),
        b"overwritten by nobody"
    );
    // No secret was made.
    assert!(!node_secret_path(&dir).exists());
    stop(child);
    let log = std::fs::read_to_string(dir.join("serve.log")).unwrap();
    assert!(log.contains("any local user can act as any user"), "{log}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mount_local_exposes_no_port_another_user_can_use() {
    if !nobody_usable() {
        return;
    }
    if !Path::new("/dev/fuse").exists() {
        eprintln!("SKIPPED: no /dev/fuse");
        return;
    }
    let dir = scratch("trust-mount-local");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (root, point) = (dir.join("root"), dir.join("mnt"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&point).unwrap();
    let log = std::fs::File::create(dir.join("mount.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_iosets"))
        .arg("mount")
        .arg(&point)
        .arg("--local")
        .arg(&root)
        .env_remove("IOSETS_AUTH_FILE")
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut guard = Unmount {
        point: point.clone(),
        child,
    };
    let child = &mut guard.child;
    let end = Instant::now() + Duration::from_secs(30);
    while iosets_mount::mounted_at(&point).is_none() {
        assert!(
            child.try_wait().unwrap().is_none() && Instant::now() < end,
            "not mounted: {}",
            std::fs::read_to_string(dir.join("mount.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The mount works through its in-process server.
    std::fs::write(point.join("f"), b"through the mount").unwrap();
    assert_eq!(std::fs::read(root.join("f")).unwrap(), b"through the mount");
    let pid = child.id();
    let tcp = listening_tcp_ports(pid);
    let unix = listening_unix(pid);
    let before_umount = (
        tcp.clone(),
        unix.clone(),
        abstract_sockets(&format!("@iosets-{pid}-")),
    );
    // Nobody finds nothing to connect to: no socket of this process listens.
    let seen = probe_as_nobody(&[("PROBE_UNIX_OF", pid.to_string())]);
    let _ = iosets_mount::umount(&point);
    let end = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    eprintln!("mount --local pid {pid}: listening tcp {tcp:?}, unix {unix:?}; nobody: {seen:?}");
    assert_eq!(before_umount.0, Vec::<u16>::new(), "TCP ports listened on");
    assert_eq!(
        before_umount.1,
        Vec::<String>::new(),
        "Unix sockets listened on"
    );
    assert!(before_umount.2.is_empty(), "{:?}", before_umount.2);
    assert_eq!(seen.get("unix_sockets").map(String::as_str), Some("0"));
    drop(guard);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A mount process and its mount point, taken down however the test ends (a failed assertion
/// must not leave a mount behind).
struct Unmount {
    point: PathBuf,
    child: std::process::Child,
}

impl Drop for Unmount {
    fn drop(&mut self) {
        if iosets_mount::mounted_at(&self.point).is_some() {
            let _ = iosets_mount::umount(&self.point);
        }
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn the_socket_listing_sees_a_servers_port() {
    // The check above is not blind: the same listing finds what `iosets serve` listens on, and
    // nobody can connect to it (then to be refused, as the first test shows).
    if !nobody_usable() {
        return;
    }
    let dir = scratch("trust-listing");
    std::fs::create_dir_all(dir.join("r")).unwrap();
    let (child, addr, admin) = default_server(&dir);
    let port: u16 = addr.rsplit(':').next().unwrap().parse().unwrap();
    let admin_port: u16 = admin.rsplit(':').next().unwrap().parse().unwrap();
    let ports = listening_tcp_ports(child.id());
    assert_eq!(ports, {
        let mut v = vec![port, admin_port];
        v.sort_unstable();
        v
    });
    assert_eq!(listening_unix(child.id()).len(), 1, "the same-host socket");
    let seen = probe_as_nobody(&[("PROBE_PORTS", port.to_string())]);
    assert_eq!(
        seen.get(&format!("port_{port}")).map(String::as_str),
        Some("connected")
    );
    stop(child);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn without_a_secret_the_same_host_socket_serves_root_and_the_servers_user_only() {
    if !nobody_usable() {
        return;
    }
    let dir = scratch("trust-peercred");
    std::fs::create_dir_all(dir.join("r")).unwrap();
    std::fs::write(dir.join("r/private"), PRIVATE).unwrap();
    // Embedded the library's default way: no secret, no trust in the host.
    let server =
        iosets_server::Server::start(iosets_server::ServerConfig::new(dir.join("r"))).unwrap();
    let admin = server.admin_addr().unwrap().to_string();
    let pid = std::process::id().to_string();
    let seen = probe_as_nobody(&[("PROBE_UNIX_OF", pid.clone())]);
    eprintln!("nobody on the same-host socket of a server without a secret: {seen:?}");
    let eacces = format!("errno:{}", libc_eacces());
    assert_eq!(seen.get("unix_sockets").map(String::as_str), Some("1"));
    assert_eq!(seen.get("unix_read_as_root"), Some(&eacces), "{seen:?}");
    assert_eq!(
        metric(&admin, "iosets_refusals_total{reason=\"local_user\"}"),
        1.0
    );
    // Root (this process's user) on the same socket is served.
    let name = abstract_sockets(&format!("@iosets-{pid}-"));
    assert_eq!(name.len(), 1, "{name:?}");
    use std::os::linux::net::SocketAddrExt;
    let a = std::os::unix::net::SocketAddr::from_abstract_name(&name[0].as_bytes()[1..]).unwrap();
    let mut s = std::os::unix::net::UnixStream::connect_addr(&a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let req = Request::Read {
        path: "private".into(),
        offset: 0,
        len: 64,
    };
    s.write_all(&frame(1, 7, req)).unwrap();
    match iosets_proto::io::read_frame_blocking(&mut s, 1 << 20).unwrap() {
        Frame::Response(_, _, Response::Ok(Reply::Data(d))) => assert_eq!(&d[..], PRIVATE),
        f => panic!("{f:?}"),
    }
    drop(s);
    assert!(server.shutdown().unwrap().balanced);
    let _ = std::fs::remove_dir_all(&dir);
}

fn libc_eacces() -> i32 {
    rustix::io::Errno::ACCESS.raw_os_error()
}
