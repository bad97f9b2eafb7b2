//! Where the etcd backend's time goes during one phase of `clusterqos bench manager`
//! (what limits it): etcd's own counters, read from every member's
//! `/metrics` before and after the phase — transactions handled and the time etcd
//! took over them, Raft proposals committed, write-ahead-log fsyncs and their
//! durations — beside the decisions the phase made, so a figure can be split into
//! group-commit batches, etcd's time and disk time.

use serde::Serialize;

/// etcd's account of one phase.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct EtcdAccount {
    /// Transactions the members handled: the writer's commits, and its reads when it
    /// resolves a commit whose reply was lost.
    pub transactions: u64,
    /// Operations of the phase per transaction: how many decisions group commit puts
    /// in one.
    pub ops_per_transaction: f64,
    /// Wall time of the phase per transaction, milliseconds: with one transaction in
    /// flight, the time one commit takes end to end.
    pub ms_per_transaction: f64,
    /// Of that, the time etcd spent on a transaction from receiving it to answering
    /// (the member that received it: Raft replication to a quorum, fsyncs, apply),
    /// milliseconds, on average; the rest is the manager's side (the gRPC client,
    /// forming the transaction, running the previous one's completions).
    pub etcd_ms_per_transaction: f64,
    /// Raft proposals the members committed (the largest count of any member).
    pub proposals: u64,
    /// Write-ahead-log fsyncs, every member together.
    pub fsyncs: u64,
    /// Their mean duration, milliseconds.
    pub fsync_mean_ms: f64,
    /// The histogram bound (etcd's buckets: 1, 2, 4, 8, 16 ... ms) that 99 % of them
    /// stayed within, milliseconds.
    pub fsync_p99_ms: f64,
}

/// The counters of every member at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Snapshot {
    transactions: u64,
    /// Seconds the members spent handling transactions (`--metrics extensive`).
    txn_seconds: f64,
    proposals: u64,
    fsyncs: u64,
    fsync_seconds: f64,
    /// (upper bound in seconds, cumulative count), summed over members.
    fsync_buckets: Vec<(f64, u64)>,
}

/// A sample line `name{labels} value` split in three (labels empty when absent).
fn sample(line: &str) -> Option<(&str, &str, f64)> {
    if line.starts_with('#') {
        return None;
    }
    let (series, value) = line.rsplit_once(' ')?;
    let value = value.parse().ok()?;
    Some(match series.split_once('{') {
        Some((name, labels)) => (name, labels.trim_end_matches('}'), value),
        None => (series, "", value),
    })
}

/// The value of label `key` in `labels` (`a="x",b="y"`).
fn label<'a>(labels: &'a str, key: &str) -> Option<&'a str> {
    labels.split(',').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == key).then(|| v.trim_matches('"'))
    })
}

impl Snapshot {
    /// Reads the counters from each member's `/metrics` text.
    pub fn parse(members: &[String]) -> Snapshot {
        let mut s = Snapshot::default();
        for text in members {
            let mut proposals = 0u64;
            for (name, labels, v) in text.lines().filter_map(sample) {
                match name {
                    "grpc_server_handled_total" if label(labels, "grpc_method") == Some("Txn") => {
                        s.transactions += v as u64
                    }
                    "grpc_server_handling_seconds_sum"
                        if label(labels, "grpc_method") == Some("Txn") =>
                    {
                        s.txn_seconds += v
                    }
                    "etcd_server_proposals_committed_total" => proposals = v as u64,
                    "etcd_disk_wal_fsync_duration_seconds_count" => s.fsyncs += v as u64,
                    "etcd_disk_wal_fsync_duration_seconds_sum" => s.fsync_seconds += v,
                    "etcd_disk_wal_fsync_duration_seconds_bucket" => {
                        let le = match label(labels, "le") {
                            Some("+Inf") => f64::INFINITY,
                            Some(b) => b.parse().unwrap_or(f64::INFINITY),
                            None => continue,
                        };
                        match s.fsync_buckets.iter_mut().find(|(b, _)| *b == le) {
                            Some((_, n)) => *n += v as u64,
                            None => s.fsync_buckets.push((le, v as u64)),
                        }
                    }
                    _ => {}
                }
            }
            s.proposals = s.proposals.max(proposals);
        }
        s.fsync_buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        s
    }

    /// What happened between `self` and `later`, for a phase of `ops` operations over
    /// `wall_s` seconds.
    pub fn until(&self, later: &Snapshot, ops: usize, wall_s: f64) -> EtcdAccount {
        let transactions = later.transactions.saturating_sub(self.transactions);
        let fsyncs = later.fsyncs.saturating_sub(self.fsyncs);
        let per = |x: f64, n: u64| if n == 0 { 0.0 } else { x / n as f64 };
        // The 99th percentile's bucket: the first bound whose count reaches 99 %.
        let fsync_p99_ms = later
            .fsync_buckets
            .iter()
            .map(|&(le, n)| {
                let before = self
                    .fsync_buckets
                    .iter()
                    .find(|(b, _)| *b == le)
                    .map_or(0, |x| x.1);
                (le, n.saturating_sub(before))
            })
            .find(|&(_, n)| fsyncs > 0 && n as f64 >= 0.99 * fsyncs as f64)
            .map_or(0.0, |(le, _)| le * 1e3);
        EtcdAccount {
            transactions,
            ops_per_transaction: per(ops as f64, transactions),
            ms_per_transaction: per(wall_s * 1e3, transactions),
            etcd_ms_per_transaction: per(
                (later.txn_seconds - self.txn_seconds).max(0.0) * 1e3,
                transactions,
            ),
            proposals: later.proposals.saturating_sub(self.proposals),
            fsyncs,
            fsync_mean_ms: per(
                (later.fsync_seconds - self.fsync_seconds).max(0.0) * 1e3,
                fsyncs,
            ),
            fsync_p99_ms,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(txns: u64, proposals: u64, buckets: &[(&str, u64)], sum: f64) -> String {
        // 2 ms of handling per transaction.
        let handling = txns as f64 * 0.002;
        let mut t = format!(
            "# HELP grpc_server_handled_total ...\n\
             grpc_server_handled_total{{grpc_code=\"OK\",grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}} {txns}\n\
             grpc_server_handled_total{{grpc_code=\"Unavailable\",grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}} 1\n\
             grpc_server_handled_total{{grpc_code=\"OK\",grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}} 99\n\
             grpc_server_handling_seconds_sum{{grpc_method=\"Txn\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}} {handling}\n\
             grpc_server_handling_seconds_sum{{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"}} 7\n\
             etcd_server_proposals_committed_total {proposals}\n\
             etcd_disk_wal_fsync_duration_seconds_sum {sum}\n"
        );
        for (le, n) in buckets {
            t.push_str(&format!(
                "etcd_disk_wal_fsync_duration_seconds_bucket{{le=\"{le}\"}} {n}\n"
            ));
        }
        let count = buckets.last().map_or(0, |b| b.1);
        t.push_str(&format!(
            "etcd_disk_wal_fsync_duration_seconds_count {count}\n"
        ));
        t
    }

    #[test]
    fn a_phase_is_the_difference_of_two_readings_over_every_member() {
        let before = Snapshot::parse(&[
            member(10, 50, &[("0.004", 10), ("0.008", 10), ("+Inf", 10)], 0.02),
            member(0, 49, &[("0.004", 10), ("0.008", 10), ("+Inf", 10)], 0.02),
        ]);
        // 100 fsyncs in the phase: 90 within 4 ms, 99 within 8 ms, one slower.
        let after = Snapshot::parse(&[
            member(60, 150, &[("0.004", 55), ("0.008", 60), ("+Inf", 60)], 0.17),
            member(0, 149, &[("0.004", 55), ("0.008", 59), ("+Inf", 60)], 0.27),
        ]);
        let a = before.until(&after, 500, 0.25);
        // Every Txn answer counts (Unavailable too, once each side), Range does not.
        assert_eq!(a.transactions, 50);
        assert_eq!(a.ops_per_transaction, 10.0);
        assert_eq!(a.ms_per_transaction, 5.0);
        assert!((a.etcd_ms_per_transaction - 2.0).abs() < 1e-9, "{a:?}");
        assert_eq!(a.proposals, 100);
        assert_eq!(a.fsyncs, 100);
        assert!((a.fsync_mean_ms - 4.0).abs() < 1e-9, "{}", a.fsync_mean_ms);
        assert_eq!(a.fsync_p99_ms, 8.0);
    }

    #[test]
    fn nothing_read_gives_zeros_not_a_division_by_zero() {
        let s = Snapshot::parse(&[String::new()]);
        assert_eq!(s.until(&s, 10, 1.0), EtcdAccount::default());
    }
}
