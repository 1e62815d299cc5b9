//! Sends one 1-byte write for each of N distinct job ids to a running server, pipelined, and
//! checks every answer: the load of `bench/job_memory.sh` (the job book's memory bound).
//!
//! `cargo run --release -p iosets-server --example many_jobs -- ADDR N [FIRST_JOB]`

use std::net::TcpStream;
use std::process::ExitCode;

use iosets_proto::io::{read_frame_blocking, write_frame_blocking};
use iosets_proto::{encode, Bytes, Frame, Header, Reply, Request, Response, DEFAULT_MAX_FRAME};
use iosets_types::JobId;

fn send(s: &mut TcpStream, tag: u64, job: u64, req: Request) -> std::io::Result<()> {
    let h = Header::new(tag, JobId(job));
    let enc = encode(&Frame::Request(h, req));
    write_frame_blocking(s, &enc)
}

fn recv(s: &mut TcpStream) -> Result<Response, String> {
    match read_frame_blocking(s, DEFAULT_MAX_FRAME).map_err(|e| e.to_string())? {
        Frame::Response(_, _, r) => Ok(r),
        f => Err(format!("unexpected frame {f:?}")),
    }
}

fn run(addr: &str, n: u64, first: u64) -> Result<(), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| format!("connect {addr}: {e}"))?;
    s.set_nodelay(true).map_err(|e| e.to_string())?;
    let create = Request::Create {
        path: "many".into(),
        mode: 0o644,
        exclusive: false,
    };
    send(&mut s, 0, first, create).map_err(|e| e.to_string())?;
    recv(&mut s)?;
    let mut job = first;
    let end = first + n;
    while job < end {
        let batch = (end - job).min(200);
        for i in 0..batch {
            let req = Request::Write {
                path: "many".into(),
                offset: 0,
                data: Bytes::from_static(b"x"),
            };
            send(&mut s, job + i, job + i, req).map_err(|e| e.to_string())?;
        }
        for _ in 0..batch {
            match recv(&mut s)? {
                Response::Ok(Reply::Written(1)) => {}
                r => return Err(format!("write refused: {r:?}")),
            }
        }
        job += batch;
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let parsed = match args.as_slice() {
        [addr, n] => n.parse().ok().map(|n| (addr.clone(), n, 1)),
        [addr, n, first] => n
            .parse()
            .ok()
            .zip(first.parse().ok())
            .map(|(n, f)| (addr.clone(), n, f)),
        _ => None,
    };
    let Some((addr, n, first)) = parsed else {
        eprintln!("usage: many_jobs ADDR N [FIRST_JOB]");
        return ExitCode::from(2);
    };
    match run(&addr, n, first) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("many_jobs: {e}");
            ExitCode::FAILURE
        }
    }
}
