//! A `scripted-model` process for another crate's tests and benches: started with a script,
//! on a free loopback port it reports, with its request log; killed and reaped on drop.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running scripted model.
pub struct Running {
    child: Child,
    /// `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    /// One JSON line per request it answered.
    pub log: PathBuf,
}

impl Running {
    /// Starts the `scripted-model` binary `bin` with `script`, its files in `dir`; returns once
    /// it has reported its port (at most 10 s).
    pub fn start(bin: &Path, script: &Value, dir: &Path) -> Result<Running, String> {
        let path = dir.join("script.json");
        std::fs::write(&path, script.to_string())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let port_file = dir.join("model.port");
        let log = dir.join("model.jsonl");
        let child = Command::new(bin)
            .arg("--script")
            .arg(&path)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&log)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        // Owned at once, so the process is killed and reaped on every path from here.
        let mut running = Running {
            child,
            base_url: String::new(),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(p) = std::fs::read_to_string(&port_file)
                && let Ok(p) = p.trim().parse::<u16>()
                && p != 0
            {
                running.base_url = format!("http://127.0.0.1:{p}/v1");
                return Ok(running);
            }
            if Instant::now() > deadline {
                return Err(format!("{} reported no port within 10 s", bin.display()));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The requests logged so far, oldest first.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
