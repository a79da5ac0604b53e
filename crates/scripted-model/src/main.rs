//! `scripted-model --script FILE [--port 0] [--port-file F] [--log FILE]`

use axum::serve::ListenerExt;
use scripted_model::script::{Engine, Script};
use scripted_model::server::{Model, router};
use std::future::IntoFuture;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str =
    "usage: scripted-model --script FILE [--port PORT] [--port-file FILE] [--log FILE]";

struct Args {
    script: PathBuf,
    port: u16,
    port_file: Option<PathBuf>,
    log: Option<PathBuf>,
}

fn parse_args() -> Result<Args, String> {
    let mut script = None;
    let mut port = 0u16;
    let mut port_file = None;
    let mut log = None;
    let mut it = std::env::args_os().skip(1);
    while let Some(a) = it.next() {
        let a = a.to_string_lossy().into_owned();
        if a == "-h" || a == "--help" {
            return Err(USAGE.into());
        }
        let mut value = || {
            it.next()
                .map(PathBuf::from)
                .ok_or_else(|| format!("{a} needs a value\n{USAGE}"))
        };
        match a.as_str() {
            "--script" => script = Some(value()?),
            "--port" => {
                let v = value()?;
                port = v
                    .to_str()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("--port {}: not a port number", v.display()))?;
            }
            "--port-file" => port_file = Some(value()?),
            "--log" => log = Some(value()?),
            _ => return Err(format!("unknown argument {a:?}\n{USAGE}")),
        }
    }
    Ok(Args {
        script: script.ok_or_else(|| format!("--script is required\n{USAGE}"))?,
        port,
        port_file,
        log,
    })
}

fn load(args: &Args) -> Result<(Engine, Option<std::fs::File>), String> {
    let text = std::fs::read_to_string(&args.script)
        .map_err(|e| format!("cannot read {}: {e}", args.script.display()))?;
    let script: Script = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a valid script: {e}", args.script.display()))?;
    let log = match &args.log {
        Some(p) => Some(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .map_err(|e| format!("cannot open log {}: {e}", p.display()))?,
        ),
        None => None,
    };
    Ok((Engine::new(script), log))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let (engine, log) = match load(&args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("scripted-model: {e}");
            return ExitCode::from(2);
        }
    };
    let listener = match tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("scripted-model: cannot bind 127.0.0.1:{}: {e}", args.port);
            return ExitCode::from(1);
        }
    };
    let port = match listener.local_addr() {
        Ok(a) => a.port(),
        Err(e) => {
            eprintln!("scripted-model: {e}");
            return ExitCode::from(1);
        }
    };
    if let Some(f) = &args.port_file {
        // Written whole, then renamed, so that a reader never sees a partial number.
        let tmp = f.with_extension("tmp");
        if let Err(e) =
            std::fs::write(&tmp, format!("{port}\n")).and_then(|_| std::fs::rename(&tmp, f))
        {
            eprintln!("scripted-model: cannot write {}: {e}", f.display());
            return ExitCode::from(1);
        }
    }
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{port}");
        let _ = out.flush();
    }
    let app = router(Model::new(engine, log));
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scripted-model: {e}");
            return ExitCode::from(1);
        }
    };
    tokio::select! {
        // Streams go out as written: without TCP_NODELAY, Nagle and delayed ACKs stall each
        // small SSE event for up to 40 ms, as no real model API's server does.
        r = axum::serve(listener.tap_io(|tcp| { let _ = tcp.set_nodelay(true); }), app).into_future() => {
            if let Err(e) = r {
                eprintln!("scripted-model: {e}");
                return ExitCode::from(1);
            }
        }
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    ExitCode::SUCCESS
}
