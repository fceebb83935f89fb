//! Store write cost: the time to append one artifact chunk to a task that already
//! holds `at` chunks, for `at` in 100, 1,000 and 10,000, on the memory, SQLite and
//! PostgreSQL stores. Flat figures across `at` mean writing one event costs in
//! proportion to that event, not to the task (streaming N chunks is linear in N).
//!
//! Each measurement keeps appending to the same pre-filled task, so the task grows
//! by the iterations criterion runs (a few thousand at most) on top of `at`.
//!
//! SQLite runs twice: `sqlite` with the default `synchronous = FULL` and
//! `sqlite-normal` with `[store] sqlite_synchronous = "normal"`. PostgreSQL runs when
//! `A2A_GATEWAY_TEST_POSTGRES_URL` is set, in a schema of its own that is dropped at
//! the end. `BENCH_STORE` (a comma-separated list of `memory`, `sqlite`,
//! `sqlite-normal`, `postgres`; default all) picks the backends. Run:
//!
//! ```text
//! A2A_GATEWAY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test \
//!   cargo bench --bench store_write -- --warm-up-time 1 --measurement-time 3
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use a2a_gateway::executor::new_id;
use a2a_gateway::protocol::{
    Artifact, Part, StreamResponse, Task, TaskArtifactUpdateEvent, TaskState, TaskStatus,
};
use a2a_gateway::scope::Scope;
use a2a_gateway::store::{
    MemoryTaskStore, PostgresTaskStore, SqliteTaskStore, Synchronous, TaskStore,
};
use a2a_gateway::test_util::PgSchema;
use criterion::{BenchmarkId, Criterion, criterion_main};
use tokio::runtime::Runtime;

/// Task sizes (chunks already in the task) at which one append is timed.
const POSITIONS: [u64; 3] = [100, 1_000, 10_000];

/// One streamed chunk: about 60 characters of text, as a model token stream sends.
fn chunk(id: &str, n: u64) -> StreamResponse {
    StreamResponse::ArtifactUpdate(TaskArtifactUpdateEvent {
        task_id: id.into(),
        context_id: "ctx".into(),
        artifact: Artifact {
            artifact_id: "reply".into(),
            name: None,
            description: None,
            parts: vec![Part::text(format!(
                "chunk {n:>6}: the quick brown fox jumps over the lazy dog. "
            ))],
            metadata: None,
            extensions: vec![],
        },
        append: n > 1,
        last_chunk: false,
        metadata: None,
    })
}

fn created(id: &str) -> StreamResponse {
    StreamResponse::Task(Task {
        id: id.into(),
        context_id: "ctx".into(),
        status: TaskStatus::new(TaskState::Working),
        artifacts: None,
        history: None,
        metadata: None,
    })
}

/// A task holding `chunks` chunks; returns its scope, id and next sequence number.
async fn prefilled(store: &dyn TaskStore, chunks: u64) -> (Scope, String, u64) {
    let scope = Scope::new("bench", "alice");
    let id = new_id();
    store.append(&scope, &id, 1, &created(&id)).await.unwrap();
    for n in 1..=chunks {
        store
            .append(&scope, &id, n + 1, &chunk(&id, n))
            .await
            .unwrap();
    }
    (scope, id, chunks + 2)
}

/// Streams `STREAM` chunks into a fresh task once, timing every append, and prints
/// the total for the first 1,000 and for all chunks (linear: about 10x) and the
/// median append time early, midway and late in the stream (flat).
fn stream_profile(rt: &Runtime, name: &str, store: &dyn TaskStore) {
    const STREAM: u64 = 10_000;
    let (scope, id, _) = rt.block_on(prefilled(store, 0));
    let mut each = Vec::with_capacity(STREAM as usize);
    rt.block_on(async {
        for n in 1..=STREAM {
            let e = chunk(&id, n);
            let start = Instant::now();
            store.append(&scope, &id, n + 1, &e).await.unwrap();
            each.push(start.elapsed());
        }
    });
    let total = |k: usize| each[..k].iter().sum::<Duration>().as_secs_f64();
    let median = |from: usize, to: usize| {
        let mut w: Vec<Duration> = each[from..to].to_vec();
        w.sort();
        w[w.len() / 2].as_secs_f64() * 1e6
    };
    let (t1k, t10k) = (total(1_000), total(STREAM as usize));
    println!(
        "stream profile {name}: first 1,000 chunks {t1k:.3} s, all 10,000 {t10k:.3} s \
         (ratio {:.1}); median append: chunks 1-500 {:.1} us, 4,501-5,000 {:.1} us, \
         9,501-10,000 {:.1} us",
        t10k / t1k,
        median(0, 500),
        median(4_500, 5_000),
        median(9_500, 10_000),
    );
}

fn bench_backend(c: &mut Criterion, rt: &Runtime, name: &str, store: Arc<dyn TaskStore>) {
    stream_profile(rt, name, &*store);
    let mut group = c.benchmark_group("store_write/append_chunk");
    group.sample_size(20);
    for at in POSITIONS {
        let (scope, id, next) = rt.block_on(prefilled(&*store, at));
        let next = AtomicU64::new(next);
        group.bench_with_input(BenchmarkId::new(name, at), &at, |b, _| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut spent = Duration::ZERO;
                    for _ in 0..iters {
                        let seq = next.fetch_add(1, Ordering::Relaxed);
                        let e = chunk(&id, seq - 1);
                        let start = Instant::now();
                        store.append(&scope, &id, seq, &e).await.unwrap();
                        spent += start.elapsed();
                    }
                    spent
                })
            });
        });
        // The snapshot still folds every chunk.
        let rec = rt.block_on(store.get(&scope, &id)).unwrap().unwrap();
        assert_eq!(rec.last_seq, next.load(Ordering::Relaxed) - 1);
    }
    group.finish();
}

fn store_write(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let wanted = std::env::var("BENCH_STORE")
        .unwrap_or_else(|_| "memory,sqlite,sqlite-normal,postgres".into());
    let wanted: Vec<&str> = wanted.split(',').map(str::trim).collect();
    if wanted.contains(&"memory") {
        bench_backend(c, &rt, "memory", Arc::new(MemoryTaskStore::new()));
    }

    for (name, sync) in [
        ("sqlite", Synchronous::Full),
        ("sqlite-normal", Synchronous::Normal),
    ] {
        if !wanted.contains(&name) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let sqlite = rt
            .block_on(SqliteTaskStore::open_path_with(
                &dir.path().join("bench.db"),
                4,
                sync,
            ))
            .unwrap();
        bench_backend(c, &rt, name, Arc::new(sqlite.clone()));
        rt.block_on(sqlite.close());
    }

    if wanted.contains(&"postgres")
        && let Some(schema) = rt.block_on(PgSchema::create("bench_store_write"))
    {
        let pg = rt
            .block_on(PostgresTaskStore::connect_with(schema.connect_options(), 4))
            .unwrap();
        bench_backend(c, &rt, "postgres", Arc::new(pg.clone()));
        rt.block_on(pg.close());
        rt.block_on(schema.close());
    }
}

/// The criterion entry points (`criterion_group!` defines an undocumented `pub fn`).
#[allow(missing_docs)]
mod entry {
    criterion::criterion_group!(benches, super::store_write);
}

criterion_main!(entry::benches);
