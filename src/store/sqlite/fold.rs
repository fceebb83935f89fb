//! How SQLite cuts a run of consecutive chunk events into log rows (see
//! [Folded rows](crate::store::sql#folded-rows)).
//!
//! The event log is a `WITHOUT ROWID` table, an index b-tree: with 4 KiB pages a row
//! keeps at most 1002 bytes in its leaf cell, and a longer row keeps about 489 there
//! and the rest in overflow pages, whole pages written for any part of one. So a row
//! is worth folding up to what stays in its cell, or when it is long enough that its
//! overflow pages are mostly full; a row of a few KiB would write a mostly empty
//! overflow page for a few hundred bytes. [`row_sizes`] keeps a run's rows in one of
//! those two shapes.

/// Bytes of a row's cell besides the event texts: the record header, `seq`, `kind`,
/// `folds_artifacts` and `created_ms` (the key's strings are counted apart).
const ROW_OVERHEAD: usize = 40;

/// The most payload a row keeps in its leaf cell with 4 KiB pages: `(4096 - 12) * 64 /
/// 255 - 23`, SQLite's `maxLocal` of an index b-tree.
const CELL_LOCAL_MAX: usize = 1002;

/// Runs at least this long (texts and commas) go into large rows.
pub(super) const LARGE_RUN: usize = 8 * 1024;

/// The most text one large row takes; a longer run is cut into rows of about equal
/// length, each above [`LARGE_RUN`].
pub(super) const LARGE_ROW_MAX: usize = 64 * 1024;

/// The text a row keeps in its cell when its key's strings (tenant, owner, task id)
/// are `key_bytes` long.
pub(super) fn local_budget(key_bytes: usize) -> usize {
    CELL_LOCAL_MAX.saturating_sub(ROW_OVERHEAD + key_bytes)
}

/// How many events each row of a run takes, in order, for a run of events whose texts
/// are `lens` bytes long (joined by one comma each in a row) and a row budget of
/// `local` bytes in the cell ([`local_budget`]): one row when the run fits the cell;
/// rows of at most `local` bytes when the run is shorter than [`LARGE_RUN`]; else
/// rows of about equal length up to [`LARGE_ROW_MAX`]. An event longer than a row's
/// budget is a row of its own. Empty for an empty run.
pub(super) fn row_sizes(lens: &[usize], local: usize) -> Vec<usize> {
    if lens.is_empty() {
        return Vec::new();
    }
    let total = lens.iter().sum::<usize>() + lens.len() - 1;
    if total <= local {
        return vec![lens.len()];
    }
    let cap = if total < LARGE_RUN {
        local
    } else {
        let rows = total.div_ceil(LARGE_ROW_MAX);
        total.div_ceil(rows)
    };
    let mut sizes = Vec::new();
    let (mut count, mut bytes) = (0usize, 0usize);
    for &len in lens {
        if count > 0 && bytes + 1 + len > cap {
            sizes.push(count);
            (count, bytes) = (0, 0);
        }
        bytes += if count == 0 { len } else { 1 + len };
        count += 1;
    }
    sizes.push(count);
    sizes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_fold_within_the_cell_or_into_large_rows() {
        let local = local_budget(80);
        assert_eq!(local, 882);
        assert!(row_sizes(&[], local).is_empty());
        // Fits the cell: one row.
        assert_eq!(row_sizes(&[290, 290, 290], local), vec![3]);
        // A few KiB: rows that each fit the cell, not one row with a mostly empty
        // overflow page.
        assert_eq!(row_sizes(&[290; 10], local), vec![3, 3, 3, 1]);
        // An event longer than the budget is a row of its own.
        assert_eq!(row_sizes(&[100, 2000, 100], local), vec![1, 1, 1]);
        // Large: one row up to 64 KiB (64 chunks of a streamed reply).
        assert_eq!(row_sizes(&[290; 64], local), vec![64]);
        // Longer: rows of about equal length, each large.
        let sizes = row_sizes(&[1000; 100], local);
        assert_eq!(sizes, vec![50, 50]);
        let sizes = row_sizes(&[1000; 70], local);
        assert_eq!(sizes.iter().sum::<usize>(), 70);
        assert_eq!(sizes.len(), 2);
        assert!(sizes.iter().all(|&n| n * 1000 >= LARGE_RUN), "{sizes:?}");
        // A key too long for any folding leaves one event per row.
        assert_eq!(row_sizes(&[290, 290], local_budget(2000)), vec![1, 1]);
    }
}
