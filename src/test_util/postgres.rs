//! A PostgreSQL schema of its own for one test or benchmark, so tests run in parallel on
//! one server and leave nothing behind.

use std::str::FromStr;
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use super::env::skip;

/// The variable that names the test server, e.g. `postgres://postgres@127.0.0.1:5432/test`.
const URL_VAR: &str = "A2A_GATEWAY_TEST_POSTGRES_URL";

/// How long creating or dropping a schema may take (connecting, or waiting for a lock
/// another session holds on one of its tables) before it fails.
const DDL_TIMEOUT: Duration = Duration::from_secs(30);

/// A fresh schema on the server at `A2A_GATEWAY_TEST_POSTGRES_URL`, named after the test
/// plus a random suffix, dropped (`DROP SCHEMA … CASCADE`) when this value is dropped,
/// also while the test panics. [`url`](Self::url) and
/// [`connect_options`](Self::connect_options) put it first on the `search_path`, so a
/// store opened with them creates its tables there.
///
/// ```no_run
/// # use a2a_gateway::test_util::PgSchema;
/// # async fn t() {
/// let Some(schema) = PgSchema::create("postgres_round_trip").await else {
///     return; // skipped with a note (or failed under CI=true)
/// };
/// let store = a2a_gateway::store::open_store(&schema.url(), 4).await.unwrap();
/// # drop(store);
/// schema.close().await;
/// # }
/// ```
#[derive(Debug)]
pub struct PgSchema {
    server_url: String,
    name: String,
    dropped: bool,
}

impl PgSchema {
    /// Creates the schema for `test`. `None` when `A2A_GATEWAY_TEST_POSTGRES_URL` is unset
    /// or empty: the test is skipped with a note, or fails under `CI=true`
    /// ([`skip`](super::skip)). Panics when the server does not answer or refuses.
    pub async fn create(test: &str) -> Option<PgSchema> {
        let Some(server_url) = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty()) else {
            skip(test, &format!("{URL_VAR} is not set"));
            return None;
        };
        let name = schema_name(test);
        ddl(&server_url, &format!("CREATE SCHEMA \"{name}\""))
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {URL_VAR}: creating schema {name}: {e}"));
        Some(PgSchema {
            server_url,
            name,
            dropped: false,
        })
    }

    /// Runs `body` in a fresh schema for `test` (nothing when [`create`](Self::create)
    /// skips) and drops the schema afterwards, also when `body` panics (the panic then
    /// goes on).
    pub async fn run(test: &str, body: impl AsyncFnOnce(&PgSchema)) {
        use futures::FutureExt;
        let Some(schema) = PgSchema::create(test).await else {
            return;
        };
        let outcome = std::panic::AssertUnwindSafe(body(&schema))
            .catch_unwind()
            .await;
        schema.close().await;
        if let Err(panic) = outcome {
            std::panic::resume_unwind(panic);
        }
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The server's URL as `A2A_GATEWAY_TEST_POSTGRES_URL` gave it (no schema).
    pub fn server_url(&self) -> &str {
        &self.server_url
    }

    /// The server's URL with the schema as its `search_path` (`options[search_path]=…`),
    /// for `open_store` or a gateway's `store.url`. Parameters may be appended with `&`.
    pub fn url(&self) -> String {
        let sep = if self.server_url.contains('?') {
            '&'
        } else {
            '?'
        };
        format!("{}{sep}options[search_path]={}", self.server_url, self.name)
    }

    /// Connect options for the server with the schema as the `search_path`.
    pub fn connect_options(&self) -> PgConnectOptions {
        PgConnectOptions::from_str(&self.server_url)
            .unwrap_or_else(|e| panic!("{URL_VAR} is not a PostgreSQL URL: {e}"))
            .options([("search_path", self.name.as_str())])
    }

    /// Drops the schema now, on the caller's runtime (while its other tasks go on).
    /// Panics when that fails.
    pub async fn close(mut self) {
        self.dropped = true;
        ddl(&self.server_url, &drop_statement(&self.name))
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL: dropping schema {}: {e}", self.name));
    }
}

impl Drop for PgSchema {
    /// Drops the schema from a thread of its own with its own runtime (a destructor
    /// cannot await, and the caller's runtime may be the one unwinding). A failure panics,
    /// or, while the test already panics, is printed.
    fn drop(&mut self) {
        if self.dropped {
            return;
        }
        let (url, name) = (self.server_url.clone(), self.name.clone());
        let outcome = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(ddl(&url, &drop_statement(&name)))
        })
        .join()
        .unwrap_or_else(|_| Err("the dropping thread panicked".into()));
        if let Err(e) = outcome {
            let note = format!("PostgreSQL: dropping schema {}: {e}", self.name);
            if std::thread::panicking() {
                eprintln!("note: {note}");
            } else {
                panic!("{note}");
            }
        }
    }
}

/// `a2a_` + the first 24 of `test`'s characters that can stand in an identifier (lower
/// case, digits, `_`) + `_` + 32 random hex digits: within PostgreSQL's 63 bytes.
fn schema_name(test: &str) -> String {
    let stem: String = test
        .chars()
        .map(|c| c.to_ascii_lowercase())
        .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
        .take(24)
        .collect();
    format!("a2a_{stem}_{}", uuid::Uuid::new_v4().simple())
}

fn drop_statement(name: &str) -> String {
    format!("DROP SCHEMA \"{name}\" CASCADE")
}

/// Runs one DDL statement on its own connection, bounded by [`DDL_TIMEOUT`] (the lock
/// wait included, through `lock_timeout`).
async fn ddl(url: &str, statement: &str) -> Result<(), String> {
    let work = async {
        let mut conn = PgConnection::connect(url).await?;
        let lock_timeout = format!("SET lock_timeout = '{}s'", DDL_TIMEOUT.as_secs());
        sqlx::query(sqlx::AssertSqlSafe(lock_timeout))
            .execute(&mut conn)
            .await?;
        sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
            .execute(&mut conn)
            .await?;
        conn.close().await
    };
    match tokio::time::timeout(DDL_TIMEOUT + Duration::from_secs(5), work).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("{statement}: no answer within {DDL_TIMEOUT:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_identifiers_within_63_bytes_and_differ() {
        let a = schema_name("Postgres: a test name far longer than twenty-four characters");
        let b = schema_name("Postgres: a test name far longer than twenty-four characters");
        assert_ne!(a, b);
        assert!(a.len() <= 63, "{a}");
        assert!(a.starts_with("a2a_postgresatestnamefarlong_"), "{a}");
        assert!(
            a.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
            "{a}"
        );
    }

    async fn exists(url: &str, name: &str) -> bool {
        let mut conn = PgConnection::connect(url).await.unwrap();
        sqlx::query_scalar::<_, bool>(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
        )
        .bind(name)
        .fetch_one(&mut conn)
        .await
        .unwrap()
    }

    /// The schema exists while the value lives, is the search_path of `url()`, and is
    /// gone after `close`, after a plain drop, and after a panic inside `run`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_schema_lives_as_long_as_its_value() {
        let Some(schema) = PgSchema::create("pg_schema_lifetime").await else {
            return;
        };
        let (url, name) = (schema.server_url().to_owned(), schema.name().to_owned());
        assert!(exists(&url, &name).await);
        let mut conn = PgConnection::connect(&schema.url()).await.unwrap();
        let path: String = sqlx::query_scalar("SHOW search_path")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(path, name);
        conn.close().await.unwrap();
        schema.close().await;
        assert!(!exists(&url, &name).await);

        let schema = PgSchema::create("pg_schema_lifetime").await.unwrap();
        let name = schema.name().to_owned();
        drop(schema);
        assert!(!exists(&url, &name).await);

        let seen = std::sync::Mutex::new(String::new());
        let run = PgSchema::run("pg_schema_lifetime", async |schema| {
            *seen.lock().unwrap() = schema.name().to_owned();
            panic!("the test fails");
        });
        let panicked = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await;
        assert!(panicked.is_err());
        let name = seen.into_inner().unwrap();
        assert!(name.starts_with("a2a_pg_schema_lifetime_"), "{name}");
        assert!(!exists(&url, &name).await);
    }
}
