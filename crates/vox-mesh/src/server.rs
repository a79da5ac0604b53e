//! A local `nats-server` with JetStream, for tests and benchmarks: on a free loopback port,
//! storing under a directory the caller owns, stopped (killed) when dropped. `VOX_NATS_SERVER`
//! names the binary (default `nats-server` on the PATH, or Debian's `/usr/sbin/nats-server`).

use std::io::Write;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `nats-server` child process with JetStream, killed on drop.
pub struct NatsServer {
    child: Option<Child>,
    /// The loopback port it listens on.
    pub port: u16,
    dir: PathBuf,
}

fn binary() -> String {
    if let Ok(b) = std::env::var("VOX_NATS_SERVER") {
        return b;
    }
    if Path::new("/usr/sbin/nats-server").exists() {
        "/usr/sbin/nats-server".into()
    } else {
        "nats-server".into()
    }
}

/// Whether a `nats-server` binary can be run here.
pub fn available() -> bool {
    Command::new(binary())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

impl NatsServer {
    /// Starts a server storing under `dir`; `auth` is extra configuration (an `authorization`
    /// block), empty for none.
    pub fn start(dir: &Path, auth: &str) -> std::io::Result<Self> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut s = NatsServer {
            child: None,
            port,
            dir: dir.to_owned(),
        };
        let conf = dir.join("nats.conf");
        let mut f = std::fs::File::create(&conf)?;
        writeln!(
            f,
            "listen: 127.0.0.1:{port}\njetstream {{ store_dir: \"{}\" }}\n{auth}",
            dir.join("js").display()
        )?;
        s.spawn()?;
        Ok(s)
    }

    fn spawn(&mut self) -> std::io::Result<()> {
        let log = std::fs::File::create(self.dir.join("nats.log"))?;
        self.child = Some(
            Command::new(binary())
                .arg("-c")
                .arg(self.dir.join("nats.conf"))
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()?,
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "nats-server did not listen on {} (see {})",
                    self.port,
                    self.dir.join("nats.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Its URL, `nats://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Kills the server (`kill -9`) and starts it again on the same port and store.
    pub fn restart(&mut self) -> std::io::Result<()> {
        self.stop();
        self.spawn()
    }

    /// Kills the server and waits for it (no-op when it is not running).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for NatsServer {
    fn drop(&mut self) {
        self.stop();
    }
}
