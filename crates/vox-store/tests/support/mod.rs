//! What the store's integration tests share: a database of their own on a real PostgreSQL
//! (`VOX_TEST_PG_URL`), and [`open`], the store the repository tests run on: SQLite in a
//! temporary directory, or with `VOX_TEST_STORE=postgres` a fresh PostgreSQL database, so the
//! same tests check both stores (`scripts/test.sh` runs them twice).
#![allow(dead_code)]

use vox_store::Store;

/// A database of its own for one test, dropped at the end.
pub struct TestDb {
    admin: String,
    name: String,
    pub url: String,
}

impl TestDb {
    pub fn new(tag: &str) -> Option<TestDb> {
        let Ok(admin) = std::env::var("VOX_TEST_PG_URL") else {
            assert!(
                std::env::var_os("CI").is_none(),
                "VOX_TEST_PG_URL is unset under CI (.ci/run starts PostgreSQL and sets it)"
            );
            eprintln!("skipped: VOX_TEST_PG_URL is unset");
            return None;
        };
        let name = format!("vox_{tag}_{}", std::process::id());
        let mut c = postgres::Client::connect(&admin, postgres::NoTls).expect("VOX_TEST_PG_URL");
        // One statement each: neither may run inside a transaction block.
        c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .unwrap();
        c.batch_execute(&format!("CREATE DATABASE {name}")).unwrap();
        let base = admin.split('?').next().unwrap();
        let url = format!("{}/{name}", &base[..base.rfind('/').unwrap()]);
        Some(TestDb { admin, name, url })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.admin, postgres::NoTls) {
            let _ = c.batch_execute(&format!(
                "DROP DATABASE IF EXISTS {} WITH (FORCE)",
                self.name
            ));
        }
    }
}

/// Where a test's store is: kept for the test's length.
pub enum Place {
    Dir(tempfile::TempDir),
    Pg(TestDb),
}

impl Place {
    /// The store opened again (a restart).
    pub fn reopen(&self) -> Store {
        match self {
            Place::Dir(d) => Store::open(&d.path().join(".vox/journey.db")).unwrap(),
            Place::Pg(db) => Store::open_postgres(&db.url).unwrap(),
        }
    }
}

fn unique_tag() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("t{}_{t}", N.fetch_add(1, Ordering::SeqCst))
}

/// The store a repository test runs on (see the module's documentation).
pub fn open() -> (Place, Store) {
    if std::env::var("VOX_TEST_STORE").as_deref() == Ok("postgres") {
        let db = TestDb::new(&unique_tag()).expect("VOX_TEST_STORE=postgres needs VOX_TEST_PG_URL");
        let s = Store::open_postgres(&db.url).unwrap();
        return (Place::Pg(db), s);
    }
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(&dir.path().join(".vox/journey.db")).unwrap();
    (Place::Dir(dir), s)
}
