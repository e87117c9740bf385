//! The history's SQLite backend (`rusqlite`, SQLite built in): a file (by default
//! `<cache>/history.sqlite`) in write-ahead-log mode, or memory for the tests.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use rusqlite::types::{ToSqlOutput, ValueRef};
use rusqlite::Connection;

use super::store::{Db, Value};

pub struct Sqlite {
    conn: Connection,
    path: Option<PathBuf>,
}

impl Sqlite {
    /// The database at `path`, made (with its folder) when missing.
    pub fn open(path: &Path) -> Result<Sqlite> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        // Several runs may record at once (mutants' child runs, two terminals): a writer waits
        // for the other rather than failing.
        conn.busy_timeout(Duration::from_secs(30))?;
        conn.pragma_update(None, "journal_mode", "WAL").with_context(|| format!("{}: WAL mode", path.display()))?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        Ok(Sqlite { conn, path: Some(path.to_path_buf()) })
    }

    /// A database in memory, gone when dropped.
    pub fn memory() -> Result<Sqlite> {
        let conn = Connection::open_in_memory()?;
        conn.pragma_update(None, "foreign_keys", "ON")?;
        Ok(Sqlite { conn, path: None })
    }
}

impl rusqlite::ToSql for Value {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Value::Null => ToSqlOutput::Owned(rusqlite::types::Value::Null),
            Value::Int(n) => ToSqlOutput::Owned(rusqlite::types::Value::Integer(*n)),
            Value::Text(s) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
        })
    }
}

fn read(v: ValueRef) -> Value {
    match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(n) => Value::Int(n),
        // Only text and integers are written; a real or a blob read back as text.
        ValueRef::Real(f) => Value::Text(f.to_string()),
        ValueRef::Text(t) | ValueRef::Blob(t) => Value::Text(String::from_utf8_lossy(t).into_owned()),
    }
}

impl Db for Sqlite {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn describe(&self) -> String {
        self.path.as_ref().map_or_else(|| "in memory".to_string(), |p| p.display().to_string())
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        self.conn.execute_batch(sql).with_context(|| format!("{}: {}", self.describe(), first_line(sql)))
    }

    fn exec(&mut self, sql: &str, params: &[Value]) -> Result<u64> {
        let n = self
            .conn
            .execute(sql, rusqlite::params_from_iter(params))
            .with_context(|| format!("{}: {}", self.describe(), first_line(sql)))?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Vec<Value>>> {
        let what = || format!("{}: {}", self.describe(), first_line(sql));
        let mut stmt = self.conn.prepare(sql).with_context(what)?;
        let columns = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params)).with_context(what)?;
        let mut out = Vec::new();
        while let Some(row) = rows.next().with_context(what)? {
            out.push((0..columns).map(|i| row.get_ref(i).map(read)).collect::<rusqlite::Result<Vec<_>>>()?);
        }
        Ok(out)
    }

    fn begin(&mut self) -> Result<()> {
        self.batch("BEGIN IMMEDIATE")
    }
}

/// A statement's first line, for an error message.
pub fn first_line(sql: &str) -> &str {
    sql.trim().lines().next().unwrap_or_default()
}

#[cfg(test)]
#[path = "sqlite/tests.rs"]
mod tests;
