//! `vox serve`: the daemon in the foreground behind the HTTP gateway (REST, WebSocket, `/mcp`),
//! with Prometheus metrics and no stdio.

use anyhow::{Context, Result};
use std::path::PathBuf;
use std::process::ExitCode;
use vox_core::Workspace;

use super::{profile_or_exit, runtime, warn_if_empty};

/// Bucket bounds of every histogram (all are durations in seconds): 100 µs to a minute.
const SECONDS_BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0, 60.0,
];

/// Checks the gateway configuration, starts the daemon and serves HTTP until the daemon stops.
/// `--host` and `--port` stand in for `VOX_MCP_HTTP_HOST` and `VOX_MCP_HTTP_PORT`.
pub fn run(
    profile: Option<String>,
    workspace: Option<PathBuf>,
    host: Option<std::net::IpAddr>,
    port: Option<u16>,
) -> Result<ExitCode> {
    let profile = match profile_or_exit(profile.as_deref(), workspace.as_deref()) {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    let config = vox_gateway::GatewayConfig::from_lookup(|k| match k {
        "VOX_MCP_HTTP_HOST" if host.is_some() => host.map(|h| h.to_string()),
        "VOX_MCP_HTTP_PORT" if port.is_some() => port.map(|p| p.to_string()),
        _ => std::env::var(k).ok(),
    });
    let config = match config {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    warn_if_empty(&profile);
    // Everything the configuration can get wrong is reported before the daemon takes the
    // workspace: a refused start leaves no socket or info file behind.
    if let Err(e) = config.surface(&profile) {
        eprintln!("error: {e}");
        return Ok(ExitCode::from(2));
    }
    let ws = Workspace::resolve(workspace.as_deref())?;
    // Logging was set up at start (`vox_cli::start`).
    // Histograms with buckets, not summaries: a summary's quantiles cover only the samples
    // since its last upkeep (they read 0 between calls while the sum grows), and cannot be
    // aggregated across replicas; buckets give true quantiles over any window in Prometheus.
    let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
        .set_buckets(SECONDS_BUCKETS)
        .map_err(|e| anyhow::anyhow!("metrics buckets: {e}"))?
        .install_recorder()
        .map_err(|e| anyhow::anyhow!("metrics recorder: {e}"))?;
    runtime()?.block_on(async move {
        let daemon = match vox_daemon::daemon::Daemon::start(
            ws,
            profile,
            vox_tools::families(),
            vox_daemon::lifetime::Kind::Started,
        ) {
            Ok(d) => d.with_session_host(vox_mcp::hosted::host()),
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let shutdown = tokio_util::sync::CancellationToken::new();
        let addr = std::net::SocketAddr::new(config.host, config.port);
        let upkeep_handle = metrics.clone();
        let limits = vox_gateway::listen::Limits {
            max_connections: config.max_connections,
            header_timeout: config.header_timeout,
        };
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("cannot bind {addr}"))?;
        let mut config = config;
        // Port 0 asks the kernel for one: the OAuth resource URI names the port bound.
        config.port = listener.local_addr()?.port();
        let (app, oauth) = match vox_gateway::router(
            daemon.orchestrator().clone(),
            config,
            Some(metrics),
            shutdown.clone(),
        ) {
            Ok(built) => built,
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::from(2));
            }
        };
        let bound = listener.local_addr()?;
        println!(
            "vox serve: listening on http://{bound} (profile {})",
            daemon.orchestrator().profile().canonical()
        );
        if let Some(oauth) = &oauth {
            match oauth.warm_up().await {
                Ok(keys) => eprintln!(
                    "vox serve: OAuth: tokens from {} for {} ({keys} signing keys)",
                    oauth.issuer(),
                    oauth.resource()
                ),
                Err(e) => eprintln!(
                    "vox serve: degraded: OAuth issuer {} cannot be reached: {e} (OAuth tokens are refused until it answers; /ready answers 503)",
                    oauth.issuer()
                ),
            }
        }
        // Degraded is said at the start, not only found on /health.
        for (sub, why) in &daemon.orchestrator().boot_report().failed {
            eprintln!("vox serve: degraded: subsystem {sub} is down: {why} (/ready answers 503)");
        }
        // The recorder keeps every histogram sample until upkeep folds them into its summaries:
        // without this task the daemon's memory would grow with each call.
        let upkeep = tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                upkeep_handle.run_upkeep();
            }
        });
        let http = tokio::spawn(vox_gateway::listen::serve(
            listener,
            app,
            limits,
            shutdown.clone(),
        ));
        // The daemon stops on SIGTERM/SIGINT or orch.shutdown; then the gateway drains.
        daemon.run().await;
        shutdown.cancel();
        upkeep.abort();
        let _ = http.await;
        Ok(ExitCode::SUCCESS)
    })
}
