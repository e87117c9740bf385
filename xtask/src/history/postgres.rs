//! The history's PostgreSQL backend (the synchronous `postgres` client, no TLS): a database
//! shared by several machines, named by a `postgres://` URL.

use anyhow::{Context, Result};
use postgres::types::{IsNull, ToSql, Type};
use postgres::{Client, NoTls};

use super::sqlite::first_line;
use super::store::{Db, Value};

pub struct Postgres {
    client: Client,
    /// The URL without its password.
    shown: String,
}

impl Postgres {
    /// Connects to `url`, giving up after 10 s unless the URL says otherwise
    /// (`connect_timeout=`): a server out of reach delays a run's end by that much at most.
    pub fn connect(url: &str) -> Result<Postgres> {
        let shown = without_password(url);
        let mut config: postgres::Config = url.parse().with_context(|| format!("{shown}: not a PostgreSQL URL"))?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        let client = config.connect(NoTls).with_context(|| format!("connecting to {shown}"))?;
        Ok(Postgres { client, shown })
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_string() };
    let Some((auth, host)) = rest.split_once('@') else { return url.to_string() };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

impl ToSql for Value {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut postgres::types::private::BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        match self {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(n) if *ty == Type::INT4 => i32::try_from(*n)?.to_sql(ty, out),
            Value::Int(n) if *ty == Type::INT8 => n.to_sql(ty, out),
            Value::Int(n) => n.to_string().to_sql(ty, out),
            Value::Text(s) => s.to_sql(ty, out),
        }
    }

    fn accepts(ty: &Type) -> bool {
        [Type::INT4, Type::INT8, Type::TEXT, Type::VARCHAR].contains(ty)
    }

    postgres::types::to_sql_checked!();
}

fn read(row: &postgres::Row, i: usize) -> Result<Value> {
    let ty = row.columns()[i].type_();
    Ok(if *ty == Type::INT8 {
        row.try_get::<_, Option<i64>>(i)?.map_or(Value::Null, Value::Int)
    } else if *ty == Type::INT4 {
        row.try_get::<_, Option<i32>>(i)?.map_or(Value::Null, |n| Value::Int(n.into()))
    } else {
        row.try_get::<_, Option<String>>(i)?.map_or(Value::Null, Value::Text)
    })
}

fn params(values: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    values.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

impl Db for Postgres {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn describe(&self) -> String {
        self.shown.clone()
    }

    fn batch(&mut self, sql: &str) -> Result<()> {
        let what = format!("{}: {}", self.shown, first_line(sql));
        self.client.batch_execute(sql).context(what)
    }

    fn exec(&mut self, sql: &str, values: &[Value]) -> Result<u64> {
        let what = format!("{}: {}", self.shown, first_line(sql));
        self.client.execute(sql, &params(values)).context(what)
    }

    fn query(&mut self, sql: &str, values: &[Value]) -> Result<Vec<Vec<Value>>> {
        let what = format!("{}: {}", self.shown, first_line(sql));
        let rows = self.client.query(sql, &params(values)).context(what)?;
        rows.iter().map(|r| (0..r.len()).map(|i| read(r, i)).collect()).collect()
    }

    fn begin(&mut self) -> Result<()> {
        // Writers one at a time (readers are not held up), so two first runs do not both
        // apply a migration.
        self.batch("BEGIN; LOCK TABLE schema_version IN EXCLUSIVE MODE")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(super::without_password("postgres://me:s3cret@db/h"), "postgres://me:***@db/h");
        assert_eq!(super::without_password("postgres://me@db/h"), "postgres://me@db/h");
        assert_eq!(super::without_password("postgresql:///h?host=/tmp"), "postgresql:///h?host=/tmp");
    }
}
