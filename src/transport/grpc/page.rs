//! ListTasks pages on gRPC within the page bound in protobuf bytes.
//!
//! The stores end a page at `server.max_list_page_bytes` of the tasks' stored JSON
//! ([`TaskQuery::max_bytes`](crate::store::TaskQuery::max_bytes)). Text takes about
//! as many bytes in protobuf as in JSON, but a data part's `Struct` takes several
//! times its JSON size (each number of a JSON array is a `Value` message of about 11
//! bytes): a page within the bound as JSON could pass the 4 MiB message limit that
//! gRPC clients apply by default. So this binding applies the same bound to the
//! page's own encoding too, cutting it further where needed; paging on still returns
//! every task once.

use prost::Message;

use super::proto;
use crate::store::PageCursor;

/// Leaves `page` as it is when its whole encoding takes at most `limit` bytes;
/// otherwise keeps its first tasks, at least one, so that the whole response (its
/// counts and the new `next_page_token` included) takes at most `limit` bytes, and
/// points that token after the last task kept (the order is the store's: status time
/// descending, id ascending).
pub fn fit_list_page(page: &mut proto::ListTasksResponse, limit: u64) {
    let fits = |p: &proto::ListTasksResponse| p.encoded_len() as u64 <= limit;
    if page.tasks.len() <= 1 || fits(page) {
        return;
    }
    // The tasks that fit as fields of the response (tag, length and bytes each)...
    let mut used = 0u64;
    let mut keep = page
        .tasks
        .iter()
        .position(|t| {
            let len = prost::encoding::message::encoded_len(1, t) as u64;
            used = used.saturating_add(len);
            used > limit
        })
        .map_or(page.tasks.len(), |i| i.max(1));
    // ... then fewer while the whole response, with its token, does not fit.
    loop {
        page.tasks.truncate(keep);
        let last = &page.tasks[keep - 1];
        page.next_page_token = PageCursor {
            status_millis: status_millis(last),
            id: last.id.clone(),
        }
        .encode();
        if keep == 1 || fits(page) {
            return;
        }
        keep -= 1;
    }
}

/// The task's status time in milliseconds since the Unix epoch, as the stores order
/// by it (0 without one).
fn status_millis(task: &proto::Task) -> i64 {
    task.status
        .as_ref()
        .and_then(|s| s.timestamp.as_ref())
        .map_or(0, |t| {
            t.seconds
                .saturating_mul(1000)
                .saturating_add(i64::from(t.nanos.div_euclid(1_000_000)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(id: &str, millis: i64, text_bytes: usize) -> proto::Task {
        proto::Task {
            id: id.into(),
            context_id: "c".into(),
            status: Some(proto::TaskStatus {
                state: 3,
                message: None,
                timestamp: Some(prost_types::Timestamp {
                    seconds: millis / 1000,
                    nanos: i32::try_from((millis % 1000) * 1_000_000).unwrap(),
                }),
            }),
            artifacts: vec![proto::Artifact {
                artifact_id: "a".into(),
                parts: vec![proto::Part {
                    content: Some(proto::part::Content::Text("x".repeat(text_bytes))),
                    ..Default::default()
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn cuts_after_the_tasks_that_fit_and_points_the_token_after_the_last_kept() {
        let mut page = proto::ListTasksResponse {
            tasks: vec![
                task("t1", 1_700_000_000_900, 1000),
                task("t2", 1_700_000_000_123, 1000),
                task("t3", 1_700_000_000_100, 1000),
            ],
            next_page_token: String::new(),
            page_size: 50,
            total_size: 3,
        };
        let one = prost::encoding::message::encoded_len(1, &page.tasks[0]) as u64;
        // Room for two tasks and the counts and token, not for three.
        fit_list_page(&mut page, 2 * one + 100);
        assert_eq!(page.tasks.len(), 2);
        let cursor = PageCursor::decode(&page.next_page_token).unwrap();
        assert_eq!(cursor.id, "t2");
        assert_eq!(cursor.status_millis, 1_700_000_000_123);
        assert_eq!(page.total_size, 3);
    }

    /// Tasks that fit as fields but not with the response's counts and token: one
    /// fewer (a default gRPC client refused a page 46 bytes over 4 MiB).
    #[test]
    fn the_counts_and_the_token_count_too() {
        let mut page = proto::ListTasksResponse {
            tasks: vec![task("t1", 2_000, 1000), task("t2", 1_000, 1000)],
            next_page_token: String::new(),
            page_size: 50,
            total_size: 2,
        };
        let tasks: u64 = page
            .tasks
            .iter()
            .map(|t| prost::encoding::message::encoded_len(1, t) as u64)
            .sum();
        assert!(page.encoded_len() as u64 > tasks + 3);
        fit_list_page(&mut page, tasks + 3);
        assert_eq!(page.tasks.len(), 1);
        assert!(page.encoded_len() as u64 <= tasks + 3);
        assert_eq!(PageCursor::decode(&page.next_page_token).unwrap().id, "t1");
    }

    #[test]
    fn keeps_one_task_however_large_and_leaves_a_fitting_page_alone() {
        let mut page = proto::ListTasksResponse {
            tasks: vec![task("big", 5, 10_000), task("next", 4, 1)],
            ..Default::default()
        };
        fit_list_page(&mut page, 10);
        assert_eq!(page.tasks.len(), 1);
        assert_eq!(PageCursor::decode(&page.next_page_token).unwrap().id, "big");
        let mut fits = proto::ListTasksResponse {
            tasks: vec![task("a", 2, 10), task("b", 1, 10)],
            next_page_token: "theirs".into(),
            ..Default::default()
        };
        fit_list_page(&mut fits, 1 << 20);
        assert_eq!(fits.tasks.len(), 2);
        assert_eq!(fits.next_page_token, "theirs", "the store's token kept");
    }
}
