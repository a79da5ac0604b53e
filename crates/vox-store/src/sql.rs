//! One SQL surface over both journey stores, so each repository is written once: statements in
//! the dialect SQLite and PostgreSQL share (`?N` placeholders, rewritten to `$N` for
//! PostgreSQL; `ON CONFLICT`; `RETURNING`; `CAST` where PostgreSQL would widen a type), values
//! bound by kind ([`Param`]) and rows read as plain values ([`Row`]).
//!
//! A connection is a [`Guard`] (SQLite's one connection, or a pooled PostgreSQL client) and a
//! transaction a [`Tx`]; both are [`Sql`], which repositories take. A PostgreSQL transaction
//! takes one advisory lock first, so write transactions of every replica run one at a time, as
//! SQLite's do: every read-modify-write a repository does inside a transaction stays correct
//! across replicas without a retry loop. (The task queue's claim, where replicas contend most,
//! takes rows with `FOR UPDATE SKIP LOCKED` instead: `pg::TaskQueue`.)

use postgres::types::{IsNull, ToSql, Type};
use std::cell::RefCell;
use std::sync::MutexGuard;

/// The advisory lock key every PostgreSQL write transaction takes ("vox-wri").
const WRITE_LOCK: i64 = 0x0076_6f78_2d77_7269;

/// A value read from a row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(String),
    /// Bytes.
    Blob(Vec<u8>),
}

/// A value bound to a placeholder.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    /// A NULL of the kind the Rust value would have had (PostgreSQL needs a NULL's type
    /// where the statement does not say it, as in `?1 IS NULL`).
    Null(Kind),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Real(f64),
    /// Text.
    Text(&'a str),
    /// Bytes.
    Blob(&'a [u8]),
}

/// The kind of a bound value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An integer (`INTEGER`, `BIGINT`).
    Int,
    /// A floating-point number (`REAL`, `DOUBLE PRECISION`).
    Real,
    /// Text (`TEXT`).
    Text,
    /// Bytes (`BLOB`, `BYTEA`).
    Blob,
    /// Left to the database to infer.
    Unknown,
}

/// A Rust value that binds to a placeholder.
pub trait ToParam {
    /// What a `None` of this type binds as.
    const KIND: Kind;
    /// The value as a parameter to bind.
    fn param(&self) -> Param<'_>;
}

impl ToParam for Param<'_> {
    const KIND: Kind = Kind::Unknown;
    fn param(&self) -> Param<'_> {
        *self
    }
}
macro_rules! int_param {
    ($($t:ty),*) => {$(
        impl ToParam for $t {
            const KIND: Kind = Kind::Int;
            fn param(&self) -> Param<'_> {
                Param::Int(*self as i64)
            }
        }
    )*};
}
int_param!(i64, i32, u32, u64, usize);
impl ToParam for bool {
    const KIND: Kind = Kind::Int;
    fn param(&self) -> Param<'_> {
        Param::Int(i64::from(*self))
    }
}
impl ToParam for f64 {
    const KIND: Kind = Kind::Real;
    fn param(&self) -> Param<'_> {
        Param::Real(*self)
    }
}
impl ToParam for str {
    const KIND: Kind = Kind::Text;
    fn param(&self) -> Param<'_> {
        Param::Text(self)
    }
}
impl ToParam for String {
    const KIND: Kind = Kind::Text;
    fn param(&self) -> Param<'_> {
        Param::Text(self)
    }
}
impl ToParam for [u8] {
    const KIND: Kind = Kind::Blob;
    fn param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}
impl ToParam for Vec<u8> {
    const KIND: Kind = Kind::Blob;
    fn param(&self) -> Param<'_> {
        Param::Blob(self)
    }
}
impl<T: ToParam + ?Sized> ToParam for &T {
    const KIND: Kind = T::KIND;
    fn param(&self) -> Param<'_> {
        (**self).param()
    }
}
impl<T: ToParam> ToParam for Option<T> {
    const KIND: Kind = T::KIND;
    fn param(&self) -> Param<'_> {
        self.as_ref().map_or(Param::Null(T::KIND), ToParam::param)
    }
}

/// The placeholders' values of one statement.
pub trait Params {
    /// The values, in placeholder order (`?1` first).
    fn params(&self) -> Vec<Param<'_>>;
}
impl<T: ToParam, const N: usize> Params for [T; N] {
    fn params(&self) -> Vec<Param<'_>> {
        self.iter().map(ToParam::param).collect()
    }
}
impl<T: ToParam> Params for &[T] {
    fn params(&self) -> Vec<Param<'_>> {
        self.iter().map(ToParam::param).collect()
    }
}
impl Params for () {
    fn params(&self) -> Vec<Param<'_>> {
        Vec::new()
    }
}

/// `params![a, b, c]`: values of different types for one statement.
macro_rules! params {
    () => { () };
    ($($p:expr),+ $(,)?) => { [$($crate::sql::ToParam::param(&$p)),+] };
}
pub(crate) use params;

/// A SQL error of either store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite's error.
    #[error(transparent)]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL's error: `SQLSTATE: message` from the server, else the client's.
    #[error("{0}")]
    Postgres(String),
    /// `query_row` found no row.
    #[error("the query returned no row")]
    NoRow,
    /// A column is missing or does not hold the type asked for.
    #[error("column {index}: {message}")]
    Column {
        /// The column's 0-based position.
        index: usize,
        /// What is wrong with it.
        message: String,
    },
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Self {
        // The server's message and position say more than the client's summary.
        match e.as_db_error() {
            Some(db) => Error::Postgres(format!("{}: {}", db.code().code(), db.message())),
            None => Error::Postgres(e.to_string()),
        }
    }
}

/// A result whose error is a SQL [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `query_row(...).optional()`: no row is `None`.
pub trait OptionalExtension<T> {
    /// `Ok(None)` for [`Error::NoRow`], the value otherwise; other errors stay errors.
    fn optional(self) -> Result<Option<T>>;
}
impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoRow | Error::Sqlite(rusqlite::Error::QueryReturnedNoRows)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}

/// One row's values, read by position.
#[derive(Debug, Clone)]
pub struct Row {
    values: Vec<Value>,
}

impl Row {
    /// Column `index` as `T`.
    pub fn get<T: FromValue>(&self, index: usize) -> Result<T> {
        let v = self.values.get(index).ok_or(Error::Column {
            index,
            message: "no such column".into(),
        })?;
        T::from_value(v).map_err(|message| Error::Column { index, message })
    }
}

/// A Rust value read from a column.
pub trait FromValue: Sized {
    /// The value, or why the column's value is not of this type.
    fn from_value(v: &Value) -> Result<Self, String>;
}

fn wrong(v: &Value, want: &str) -> String {
    format!("{v:?} is not {want}")
}

impl FromValue for i64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Int(i) => Ok(*i),
            other => Err(wrong(other, "an integer")),
        }
    }
}
macro_rules! narrow_int {
    ($($t:ty),*) => {$(
        impl FromValue for $t {
            fn from_value(v: &Value) -> Result<Self, String> {
                let i = i64::from_value(v)?;
                <$t>::try_from(i).map_err(|_| format!("{i} is out of range"))
            }
        }
    )*};
}
narrow_int!(i32, u32, u64, usize);
impl FromValue for bool {
    fn from_value(v: &Value) -> Result<Self, String> {
        Ok(i64::from_value(v)? != 0)
    }
}
impl FromValue for f64 {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Real(f) => Ok(*f),
            Value::Int(i) => Ok(*i as f64),
            other => Err(wrong(other, "a number")),
        }
    }
}
impl FromValue for String {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Text(s) => Ok(s.clone()),
            other => Err(wrong(other, "text")),
        }
    }
}
impl FromValue for Vec<u8> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Blob(b) => Ok(b.clone()),
            Value::Text(s) => Ok(s.as_bytes().to_vec()),
            other => Err(wrong(other, "bytes")),
        }
    }
}
impl<T: FromValue> FromValue for Option<T> {
    fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::Null => Ok(None),
            v => T::from_value(v).map(Some),
        }
    }
}

/// Runs statements: a connection or a transaction of either store.
pub trait Sql {
    /// Every row of a statement.
    fn rows(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>>;
    /// A statement's count of changed rows.
    fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<usize>;
    /// The id of the row the last `INSERT` on this connection added.
    fn last_insert_rowid(&self) -> Result<i64>;
}

/// The calls repositories make, on any [`Sql`] (in rusqlite's shapes).
pub trait SqlExt: Sql {
    /// Runs `sql` with `params`; the count of rows it changed.
    fn execute(&self, sql: &str, params: impl Params) -> Result<usize> {
        self.run(sql, &params.params())
    }
    /// Runs `sql` with `params` and maps its first row with `f`; [`Error::NoRow`] if it has none.
    fn query_row<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        let rows = self.rows(sql, &params.params())?;
        f(rows.first().ok_or(Error::NoRow)?)
    }
    /// Runs `sql` with `params` and maps every row with `f`, in order.
    fn query_map<T>(
        &self,
        sql: &str,
        params: impl Params,
        f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.rows(sql, &params.params())?.iter().map(f).collect()
    }
    /// A statement to run (kept for rusqlite's `prepare(..)?.query_map(..)` shape; SQLite
    /// caches every statement, PostgreSQL sends each with its parameters' types).
    fn prepare(&self, sql: &str) -> Result<Stmt<'_, Self>> {
        Ok(Stmt {
            c: self,
            sql: sql.to_owned(),
        })
    }
    /// The same as [`SqlExt::prepare`] (both stores cache statements themselves).
    fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_, Self>> {
        self.prepare(sql)
    }
}
impl<S: Sql + ?Sized> SqlExt for S {}

/// A statement bound to its connection.
pub struct Stmt<'c, S: ?Sized> {
    c: &'c S,
    sql: String,
}

impl<S: Sql + ?Sized> Stmt<'_, S> {
    /// Each row mapped by `f`, as rusqlite's `query_map` (collect into a `Result`).
    pub fn query_map<T>(
        &mut self,
        params: impl Params,
        mut f: impl FnMut(&Row) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let rows = self.c.rows(&self.sql, &params.params())?;
        Ok(rows.iter().map(&mut f).collect::<Vec<_>>().into_iter())
    }
    /// Runs the statement and maps its first row with `f`; [`Error::NoRow`] if it has none.
    pub fn query_row<T>(
        &mut self,
        params: impl Params,
        f: impl FnOnce(&Row) -> Result<T>,
    ) -> Result<T> {
        self.c.query_row(&self.sql, params, f)
    }
    /// Runs the statement; the count of rows it changed.
    pub fn execute(&mut self, params: impl Params) -> Result<usize> {
        self.c.run(&self.sql, &params.params())
    }
}

// ---- SQLite -------------------------------------------------------------------------------

fn lite_params<'a>(params: &'a [Param<'a>]) -> Vec<rusqlite::types::ToSqlOutput<'a>> {
    use rusqlite::types::{ToSqlOutput, ValueRef};
    params
        .iter()
        .map(|p| {
            ToSqlOutput::Borrowed(match *p {
                Param::Null(_) => ValueRef::Null,
                Param::Int(i) => ValueRef::Integer(i),
                Param::Real(f) => ValueRef::Real(f),
                Param::Text(s) => ValueRef::Text(s.as_bytes()),
                Param::Blob(b) => ValueRef::Blob(b),
            })
        })
        .collect()
}

fn lite_rows(c: &rusqlite::Connection, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
    use rusqlite::types::ValueRef;
    let mut stmt = c.prepare_cached(sql)?;
    let n = stmt.column_count();
    let bound = lite_params(params);
    let mut rows = stmt.query(rusqlite::params_from_iter(bound.iter()))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next()? {
        let mut values = Vec::with_capacity(n);
        for i in 0..n {
            values.push(match r.get_ref(i)? {
                ValueRef::Null => Value::Null,
                ValueRef::Integer(i) => Value::Int(i),
                ValueRef::Real(f) => Value::Real(f),
                ValueRef::Text(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
                ValueRef::Blob(b) => Value::Blob(b.to_vec()),
            });
        }
        out.push(Row { values });
    }
    Ok(out)
}

impl Sql for rusqlite::Connection {
    fn rows(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        lite_rows(self, sql, params)
    }
    fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<usize> {
        let bound = lite_params(params);
        Ok(self
            .prepare_cached(sql)?
            .execute(rusqlite::params_from_iter(bound.iter()))?)
    }
    fn last_insert_rowid(&self) -> Result<i64> {
        Ok(rusqlite::Connection::last_insert_rowid(self))
    }
}

// ---- PostgreSQL ---------------------------------------------------------------------------

/// A NULL whose type the server infers from where it stands.
#[derive(Debug)]
struct Null;

impl ToSql for Null {
    fn to_sql(
        &self,
        _: &Type,
        _: &mut postgres::types::private::BytesMut,
    ) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        Ok(IsNull::Yes)
    }
    fn accepts(_: &Type) -> bool {
        true
    }
    postgres::types::to_sql_checked!();
}

/// `?N` (and a bare `?`) as `$N`, outside quoted text.
pub fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut quoted = false;
    let mut next = 0;
    let mut chars = sql.chars().peekable();
    while let Some(ch) = chars.next() {
        match ch {
            '\'' => {
                quoted = !quoted;
                out.push(ch);
            }
            '?' if !quoted => {
                out.push('$');
                if chars.peek().is_some_and(char::is_ascii_digit) {
                    while let Some(d) = chars.next_if(char::is_ascii_digit) {
                        out.push(d);
                    }
                } else {
                    next += 1;
                    out.push_str(&next.to_string());
                }
            }
            _ => out.push(ch),
        }
    }
    out
}

/// The unspecified type (oid 0): the server infers it.
fn unknown() -> Type {
    Type::new(
        String::new(),
        0,
        postgres::types::Kind::Simple,
        String::new(),
    )
}

fn pg_params<'a>(params: &'a [Param<'a>], unknown: &Type) -> Vec<(&'a (dyn ToSql + Sync), Type)> {
    params
        .iter()
        .map(|p| -> (&(dyn ToSql + Sync), Type) {
            match p {
                Param::Null(Kind::Int) => (&Null, Type::INT8),
                Param::Null(Kind::Real) => (&Null, Type::FLOAT8),
                Param::Null(Kind::Text) => (&Null, Type::TEXT),
                Param::Null(Kind::Blob) => (&Null, Type::BYTEA),
                Param::Null(Kind::Unknown) => (&Null, unknown.clone()),
                Param::Int(i) => (i, Type::INT8),
                Param::Real(f) => (f, Type::FLOAT8),
                Param::Text(s) => (s, Type::TEXT),
                Param::Blob(b) => (b, Type::BYTEA),
            }
        })
        .collect()
}

fn pg_value(r: &postgres::Row, i: usize) -> Result<Value> {
    let t = r.columns()[i].type_();
    let v = match *t {
        Type::INT8 => r.try_get::<_, Option<i64>>(i)?.map(Value::Int),
        Type::INT4 => r
            .try_get::<_, Option<i32>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::INT2 => r
            .try_get::<_, Option<i16>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::BOOL => r
            .try_get::<_, Option<bool>>(i)?
            .map(|v| Value::Int(v.into())),
        Type::FLOAT8 => r.try_get::<_, Option<f64>>(i)?.map(Value::Real),
        Type::FLOAT4 => r
            .try_get::<_, Option<f32>>(i)?
            .map(|v| Value::Real(v.into())),
        Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i)?.map(Value::Blob),
        Type::TEXT | Type::VARCHAR | Type::NAME | Type::BPCHAR | Type::UNKNOWN => {
            r.try_get::<_, Option<String>>(i)?.map(Value::Text)
        }
        ref other => {
            return Err(Error::Column {
                index: i,
                message: format!("PostgreSQL type {other} is not read (CAST it in the query)"),
            });
        }
    };
    Ok(v.unwrap_or(Value::Null))
}

/// What runs PostgreSQL statements: a client or a transaction.
pub(crate) trait PgRun {
    fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<postgres::Row>, postgres::Error>;
    fn execute_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<u64, postgres::Error>;
}
impl PgRun for postgres::Client {
    fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        postgres::Client::query_typed(self, sql, params)
    }
    fn execute_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<u64, postgres::Error> {
        postgres::Client::execute_typed(self, sql, params)
    }
}
impl PgRun for postgres::Transaction<'_> {
    fn query_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<Vec<postgres::Row>, postgres::Error> {
        postgres::Transaction::query_typed(self, sql, params)
    }
    fn execute_typed(
        &mut self,
        sql: &str,
        params: &[(&(dyn ToSql + Sync), Type)],
    ) -> Result<u64, postgres::Error> {
        postgres::Transaction::execute_typed(self, sql, params)
    }
}

/// Runs `f`, which blocks on the `postgres` client's own runtime, where that is allowed: as it
/// is on a plain thread or tokio's blocking pool; on a multi-thread runtime's worker through
/// `block_in_place`; on a current-thread runtime (tests) on a scoped thread.
pub(crate) fn blocking<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Err(_) => f(),
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        Ok(_) => std::thread::scope(|s| s.spawn(f).join())
            .unwrap_or_else(|p| std::panic::resume_unwind(p)),
    }
}

type PgConn<'a> = &'a mut (dyn PgRun + Send);

fn pg_rows(run: PgConn<'_>, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
    let sql = dollar_placeholders(sql);
    let unknown = unknown();
    let bound = pg_params(params, &unknown);
    let rows = blocking(|| run.query_typed(&sql, &bound))?;
    rows.iter()
        .map(|r| {
            Ok(Row {
                values: (0..r.len())
                    .map(|i| pg_value(r, i))
                    .collect::<Result<_>>()?,
            })
        })
        .collect()
}

fn pg_run(run: PgConn<'_>, sql: &str, params: &[Param<'_>]) -> Result<usize> {
    let sql = dollar_placeholders(sql);
    let unknown = unknown();
    let bound = pg_params(params, &unknown);
    Ok(blocking(|| run.execute_typed(&sql, &bound))? as usize)
}

fn pg_last_id(run: PgConn<'_>) -> Result<i64> {
    // The identity columns' sequences: the value the last INSERT of this session took.
    let rows = pg_rows(run, "SELECT lastval()", &[])?;
    rows.first().ok_or(Error::NoRow)?.get(0)
}

// ---- Connections and transactions ---------------------------------------------------------

/// A connection of either store, for one call.
pub struct Guard<'s> {
    inner: GuardInner<'s>,
}

enum GuardInner<'s> {
    Lite(MutexGuard<'s, rusqlite::Connection>),
    Pg {
        store: &'s crate::pg::PgStore,
        client: RefCell<Option<Box<postgres::Client>>>,
    },
}

fn no_client() -> Error {
    Error::Postgres("the connection was given back".into())
}

impl<'s> Guard<'s> {
    pub(crate) fn lite(c: MutexGuard<'s, rusqlite::Connection>) -> Self {
        Guard {
            inner: GuardInner::Lite(c),
        }
    }
    pub(crate) fn pg(store: &'s crate::pg::PgStore, client: postgres::Client) -> Self {
        Guard {
            inner: GuardInner::Pg {
                store,
                client: RefCell::new(Some(Box::new(client))),
            },
        }
    }

    /// A transaction: on SQLite deferred, on PostgreSQL serialized with every replica's
    /// write transactions (see the module's documentation).
    pub fn transaction(&mut self) -> Result<Tx<'_>> {
        self.begin(rusqlite::TransactionBehavior::Deferred)
    }

    /// A transaction that writes: on SQLite it takes the write lock at once.
    pub fn transaction_with_behavior(
        &mut self,
        behavior: rusqlite::TransactionBehavior,
    ) -> Result<Tx<'_>> {
        self.begin(behavior)
    }

    fn begin(&mut self, behavior: rusqlite::TransactionBehavior) -> Result<Tx<'_>> {
        match &mut self.inner {
            GuardInner::Lite(c) => {
                metrics::counter!("vox_store_transactions_total", "backend" => "sqlite")
                    .increment(1);
                Ok(Tx {
                    inner: Some(TxInner::Lite(c.transaction_with_behavior(behavior)?)),
                })
            }
            GuardInner::Pg { client, .. } => {
                metrics::counter!("vox_store_transactions_total", "backend" => "postgres")
                    .increment(1);
                let client = client.get_mut().as_mut().ok_or_else(no_client)?;
                let mut tx = blocking(|| client.transaction())?;
                // How long replicas' writes queue for one another.
                let waited = std::time::Instant::now();
                blocking(|| tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK]))?;
                metrics::histogram!("vox_store_write_lock_wait_seconds")
                    .record(waited.elapsed().as_secs_f64());
                Ok(Tx {
                    inner: Some(TxInner::Pg(RefCell::new(Box::new(tx)))),
                })
            }
        }
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if let GuardInner::Pg { store, client } = &mut self.inner
            && let Some(c) = client.get_mut().take()
        {
            store.give_back(*c);
        }
    }
}

impl Sql for Guard<'_> {
    fn rows(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        match &self.inner {
            GuardInner::Lite(c) => lite_rows(c, sql, params),
            GuardInner::Pg { client, .. } => {
                let mut c = client.borrow_mut();
                pg_rows(&mut **c.as_mut().ok_or_else(no_client)?, sql, params)
            }
        }
    }
    fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<usize> {
        match &self.inner {
            GuardInner::Lite(c) => c.run(sql, params),
            GuardInner::Pg { client, .. } => {
                let mut c = client.borrow_mut();
                pg_run(&mut **c.as_mut().ok_or_else(no_client)?, sql, params)
            }
        }
    }
    fn last_insert_rowid(&self) -> Result<i64> {
        match &self.inner {
            GuardInner::Lite(c) => Ok(c.last_insert_rowid()),
            GuardInner::Pg { client, .. } => {
                let mut c = client.borrow_mut();
                pg_last_id(&mut **c.as_mut().ok_or_else(no_client)?)
            }
        }
    }
}

/// A transaction of either store; rolled back unless committed.
pub struct Tx<'c> {
    /// `None` once committed.
    inner: Option<TxInner<'c>>,
}

enum TxInner<'c> {
    Lite(rusqlite::Transaction<'c>),
    Pg(RefCell<Box<postgres::Transaction<'c>>>),
}

impl<'c> Tx<'c> {
    /// Commits the transaction (on PostgreSQL, releasing the write lock with it).
    pub fn commit(mut self) -> Result<()> {
        match self.inner.take() {
            Some(TxInner::Lite(t)) => Ok(t.commit()?),
            Some(TxInner::Pg(t)) => {
                let t = t.into_inner();
                Ok(blocking(move || t.commit())?)
            }
            None => Ok(()),
        }
    }

    fn inner(&self) -> Result<&TxInner<'c>> {
        self.inner
            .as_ref()
            .ok_or_else(|| Error::Postgres("the transaction has ended".into()))
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        // Not committed: rolled back, on PostgreSQL by the client's own runtime, which must
        // not be entered from an async worker (an early return in a handler's transaction).
        if let Some(TxInner::Pg(t)) = self.inner.take() {
            let t = t.into_inner();
            blocking(move || drop(t));
        }
    }
}

impl Sql for Tx<'_> {
    fn rows(&self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>> {
        match self.inner()? {
            TxInner::Lite(t) => lite_rows(t, sql, params),
            TxInner::Pg(t) => pg_rows(&mut **t.borrow_mut(), sql, params),
        }
    }
    fn run(&self, sql: &str, params: &[Param<'_>]) -> Result<usize> {
        match self.inner()? {
            TxInner::Lite(t) => (**t).run(sql, params),
            TxInner::Pg(t) => pg_run(&mut **t.borrow_mut(), sql, params),
        }
    }
    fn last_insert_rowid(&self) -> Result<i64> {
        match self.inner()? {
            TxInner::Lite(t) => Ok(t.last_insert_rowid()),
            TxInner::Pg(t) => pg_last_id(&mut **t.borrow_mut()),
        }
    }
}
