//! The controller's Prometheus metrics: what each replica's spread looks like now, and how the
//! reconciler itself is doing.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ome_spread_core::diagnosis::Report;
use ome_spread_core::loss::Loss;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::error::lock;

pub struct Metrics {
    registry: Registry,
    replicas: Arc<Replicas>,
    reconciles: Counter,
    errors: Family<[(&'static str, String); 1], Counter>,
    duration: Histogram,
    event_to_condition: Histogram,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut metrics = Self {
            registry: Registry::with_prefix("ome_spread"),
            replicas: Arc::default(),
            reconciles: Counter::default(),
            errors: Family::default(),
            duration: Histogram::new(exponential_buckets(0.0005, 2.0, 14)),
            // Doubling from 1 ms to 16.384 s: a write within a millisecond and one 10 s late each
            // fall in a bucket of their own.
            event_to_condition: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            leader: Gauge::default(),
        };
        metrics.registry.register_collector(Box::new(metrics.replicas.clone()));
        // A registry of the same prefix, so that the controller's own metrics follow the replicas'.
        let own = metrics.registry.sub_registry_with_labels(std::iter::empty());
        own.register("reconciles", "Reconciles run", metrics.reconciles.clone());
        own.register(
            "reconcile_errors",
            "Reconciles that failed, by kind of error",
            metrics.errors.clone(),
        );
        own.register(
            "reconcile_duration_seconds",
            "Time a reconcile takes, API calls included",
            metrics.duration.clone(),
        );
        own.register(
            "event_to_condition_seconds",
            "From a watch event's arrival to the answer to the Spread condition's write it led to, when the write changed the condition; of several events one reconcile acts on, from the first",
            metrics.event_to_condition.clone(),
        );
        own.register(
            "leader",
            "1 while this process leads (holds the Lease), 0 while it stands by",
            metrics.leader.clone(),
        );
        metrics
    }
}

impl Metrics {
    pub fn reconciled(&self, took: Duration) {
        self.reconciles.inc();
        self.duration.observe(took.as_secs_f64());
    }

    pub fn failed(&self, error: &str, took: Duration) {
        self.reconciled(took);
        self.errors.get_or_create(&[("error", error.into())]).inc();
    }

    /// A condition written: `since_event` after the first event it shows arrived.
    pub fn condition_written(&self, since_event: Duration) {
        self.event_to_condition.observe(since_event.as_secs_f64());
    }

    pub fn set_leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }

    /// Shows a replica's report and what losing its worst domain leaves (None: no key or no
    /// Instance, no series), in place of what was shown for it before.
    pub fn show(&self, namespace: &str, replica: &str, report: &Report, worst_loss: Option<&Loss>) {
        let per_domain = &report.instances_per_domain;
        let instances = per_domain.iter().map(|(d, n)| (Some(("domain", d.clone())), *n));
        let reason = (Some(("reason", report.reason.as_str().to_owned())), 1);
        let left_serving = one(worst_loss.map(|loss| loss.left_serving));
        let replaceable = one(worst_loss.map(|loss| loss.placed_again.len()));
        let shown = [
            ("instances", instances.collect()),
            // No domains counted (the reason came first): no skew to show, rather than a false 0.
            ("skew", one((!per_domain.is_empty()).then_some(report.skew))),
            ("reason", vec![reason]),
            ("worst_domain_left_serving", left_serving),
            ("worst_domain_replaceable", replaceable),
        ];
        self.replicas.show(namespace, replica, shown);
    }

    /// Shows the moves a replica's plan still needs; None (rebalance off) removes the series.
    pub fn rebalance_moves(&self, namespace: &str, replica: &str, moves: Option<usize>) {
        self.replicas
            .show(namespace, replica, [("rebalance_moves", one(moves))]);
    }

    /// Removes a replica's series: it is gone, or no longer on OMENative.
    pub fn forget(&self, namespace: &str, replica: &str) {
        lock(&self.replicas.0).remove(&(namespace.to_owned(), replica.to_owned()));
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut text, &self.registry);
        text
    }
}

/// What each replica shows now, by namespace and name, then by gauge: its series are written
/// from it at each scrape, so that a domain or reason that goes away leaves no stale series.
#[derive(Debug, Default)]
struct Replicas(Mutex<BTreeMap<(String, String), Shown>>);

/// What a replica shows, by gauge.
type Shown = BTreeMap<&'static str, Series>;

/// A replica's series of one gauge: the label of its own, if any, and the value.
type Series = Vec<(Option<(&'static str, String)>, usize)>;

/// The one series of a gauge without a label of its own, if it has a value.
fn one(value: Option<usize>) -> Series {
    value.map(|value| (None, value)).into_iter().collect()
}

/// The replicas' gauges, by name: their help, as the registry would write it.
const GAUGES: [(&str, &str); 6] = [
    (
        "instances",
        "Placed Instances (leaders or single pods) of a replica per eligible domain.",
    ),
    (
        "skew",
        "Difference between the most and the fewest Instances per eligible domain.",
    ),
    (
        "reason",
        "The replica's current Spread reason (1); other reasons have no series.",
    ),
    (
        "rebalance_moves",
        "Instance migrations the rebalance plan still needs (0: none can help); no series when rebalance is off.",
    ),
    (
        "worst_domain_left_serving",
        "Instances of a replica left serving after losing the domain or rack whose loss leaves the fewest.",
    ),
    (
        "worst_domain_replaceable",
        "How many of the Instances lost with that domain the scheduler could place again, whole.",
    ),
];

impl Replicas {
    /// Shows these gauges' series of a replica in place of what they showed before.
    fn show(&self, namespace: &str, replica: &str, shown: impl IntoIterator<Item = (&'static str, Series)>) {
        let key = (namespace.to_owned(), replica.to_owned());
        lock(&self.0).entry(key).or_default().extend(shown);
    }
}

impl Collector for Replicas {
    /// Each gauge that has a series, as a family of the registry's (none has no descriptor).
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let replicas = lock(&self.0);
        for (name, help) in GAUGES {
            let series: Vec<(Vec<_>, usize)> = (replicas.iter())
                .flat_map(|((namespace, replica), shown)| {
                    let labels = [("namespace", namespace.as_str()), ("replica", replica.as_str())];
                    let series = shown.get(name).into_iter().flatten();
                    series.map(move |(own, value)| {
                        let own = own.as_ref().map(|(label, value)| (*label, value.as_str()));
                        (labels.into_iter().chain(own).collect(), *value)
                    })
                })
                .collect();
            if series.is_empty() {
                continue;
            }
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, value) in &series {
                family.encode_family(labels)?.encode_gauge(value)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ome_spread_core::diagnosis::Reason;
    use ome_spread_core::spread::SpreadSettings;

    /// A report of `reason`, its Instances per domain and skew, with no message.
    pub(crate) fn report(reason: Reason, per_domain: &[(&str, usize)], skew: usize) -> Report {
        Report {
            reason,
            message: String::new(),
            action: "",
            projected: SpreadSettings::default(),
            in_effect: SpreadSettings::default(),
            instances_per_domain: per_domain.iter().map(|(d, n)| ((*d).to_owned(), *n)).collect(),
            skew,
        }
    }

    fn series(metrics: &Metrics) -> Vec<String> {
        metrics
            .encode()
            .lines()
            .filter(|l| {
                l.starts_with("ome_spread_instances{")
                    || l.starts_with("ome_spread_skew{")
                    || l.starts_with("ome_spread_reason{")
            })
            .map(String::from)
            .collect()
    }

    #[test]
    fn a_replica_shows_its_instances_per_domain_skew_and_only_its_current_reason() {
        let metrics = Metrics::default();
        metrics.show(
            "ns",
            "m-engine",
            &report(Reason::Skewed, &[("zone-a", 3), ("zone-b", 0)], 3),
            None,
        );
        let mut shown = series(&metrics);
        shown.sort();
        assert_eq!(
            shown,
            [
                r#"ome_spread_instances{namespace="ns",replica="m-engine",domain="zone-a"} 3"#,
                r#"ome_spread_instances{namespace="ns",replica="m-engine",domain="zone-b"} 0"#,
                r#"ome_spread_reason{namespace="ns",replica="m-engine",reason="Skewed"} 1"#,
                r#"ome_spread_skew{namespace="ns",replica="m-engine"} 3"#,
            ]
        );
        metrics.show(
            "ns",
            "m-engine",
            &report(Reason::Satisfied, &[("zone-a", 2), ("zone-c", 1)], 1),
            None,
        );
        let mut shown = series(&metrics);
        shown.sort();
        assert_eq!(
            shown,
            [
                r#"ome_spread_instances{namespace="ns",replica="m-engine",domain="zone-a"} 2"#,
                r#"ome_spread_instances{namespace="ns",replica="m-engine",domain="zone-c"} 1"#,
                r#"ome_spread_reason{namespace="ns",replica="m-engine",reason="Satisfied"} 1"#,
                r#"ome_spread_skew{namespace="ns",replica="m-engine"} 1"#,
            ],
            "no stale domain or reason"
        );
        metrics.show("ns", "m-engine", &report(Reason::NoKey, &[], 0), None);
        assert_eq!(
            series(&metrics),
            [r#"ome_spread_reason{namespace="ns",replica="m-engine",reason="NoKey"} 1"#],
            "no skew without domains"
        );
        metrics.rebalance_moves("ns", "m-engine", Some(2));
        assert!(
            metrics
                .encode()
                .contains("ome_spread_rebalance_moves{namespace=\"ns\",replica=\"m-engine\"} 2\n")
        );
        metrics.forget("ns", "m-engine");
        assert_eq!(series(&metrics), Vec::<String>::new());
        assert!(
            !metrics.encode().contains("ome_spread_rebalance_moves{"),
            "forgotten with the replica"
        );
    }

    /// Losing zone-a leaves 3 of 5 Instances serving; one of the 2 lost is placed again in zone-b.
    fn worst_loss() -> Loss {
        Loss {
            domain: "zone-a".into(),
            lost: vec!["m-engine-0-default-0".into(), "m-engine-3-default-0".into()],
            left_serving: 3,
            instances: 5,
            placed_again: vec!["zone-b".into()],
            still_counts: None,
        }
    }

    /// What losing the worst domain leaves: shown with the report, gone with no loss to show
    /// and with the replica.
    #[test]
    fn a_replica_shows_what_losing_its_worst_domain_leaves() {
        let metrics = Metrics::default();
        let worst = worst_loss();
        let satisfied = report(Reason::Satisfied, &[("zone-a", 2), ("zone-b", 3)], 1);
        let lines = |metrics: &Metrics| {
            let text = metrics.encode();
            let worst = text.lines().filter(|l| l.starts_with("ome_spread_worst_domain_"));
            worst.map(String::from).collect::<Vec<_>>()
        };
        metrics.show("ns", "m-engine", &satisfied, Some(&worst));
        assert_eq!(
            lines(&metrics),
            [
                r#"ome_spread_worst_domain_left_serving{namespace="ns",replica="m-engine"} 3"#,
                r#"ome_spread_worst_domain_replaceable{namespace="ns",replica="m-engine"} 1"#,
            ]
        );
        metrics.show("ns", "m-engine", &satisfied, None);
        assert_eq!(lines(&metrics), Vec::<String>::new(), "no stale loss");
        metrics.show("ns", "m-engine", &satisfied, Some(&worst));
        metrics.forget("ns", "m-engine");
        assert_eq!(lines(&metrics), Vec::<String>::new(), "forgotten with the replica");
    }

    #[test]
    fn the_leader_gauge_is_0_standing_by_and_1_leading() {
        let metrics = Metrics::default();
        let leader = |metrics: &Metrics| {
            let text = metrics.encode();
            text.lines()
                .filter(|l| l.starts_with("ome_spread_leader"))
                .map(String::from)
                .collect::<Vec<_>>()
        };
        assert_eq!(leader(&metrics), ["ome_spread_leader 0"]);
        metrics.set_leading(true);
        assert_eq!(leader(&metrics), ["ome_spread_leader 1"]);
        metrics.set_leading(false);
        assert_eq!(leader(&metrics), ["ome_spread_leader 0"]);
    }

    /// Every metric /metrics exports is named in docs/controller.md (a counter by its `_total`).
    #[test]
    fn every_exported_metric_is_documented() {
        let docs = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/controller.md"))
            .expect("docs/controller.md");
        // Every kind of series shown, so that each family is in the exposition.
        let metrics = Metrics::default();
        let skewed = report(Reason::Skewed, &[("zone-a", 3), ("zone-b", 2)], 1);
        metrics.show("ns", "m-engine", &skewed, Some(&worst_loss()));
        metrics.rebalance_moves("ns", "m-engine", Some(1));
        metrics.failed("api_500", Duration::from_millis(3));
        let text = metrics.encode();
        let exported: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| match l.split_once(' ') {
                Some((name, "counter")) => format!("{name}_total"),
                _ => l.split(' ').next().unwrap_or_default().to_owned(),
            })
            .collect();
        assert_eq!(exported.len(), 11, "{text}");
        for name in exported {
            assert!(
                docs.contains(&format!("`{name}`")),
                "{name} is not in docs/controller.md"
            );
        }
    }

    /// The families in the order docs/controller.md lists them; a replica's gauge with no series
    /// has no descriptor either.
    #[test]
    fn families_come_in_the_documented_order_and_only_with_series() {
        let types = |metrics: &Metrics| {
            let text = metrics.encode();
            let types = text.lines().filter_map(|l| l.strip_prefix("# TYPE ome_spread_"));
            types.map(String::from).collect::<Vec<_>>()
        };
        let own = [
            "reconciles counter",
            "reconcile_errors counter",
            "reconcile_duration_seconds histogram",
            "event_to_condition_seconds histogram",
            "leader gauge",
        ];
        let metrics = Metrics::default();
        let no_errors = [own[0], own[2], own[3], own[4]];
        assert_eq!(types(&metrics), no_errors);
        metrics.failed("api_500", Duration::from_millis(3));
        assert_eq!(types(&metrics), own);
        metrics.show("ns", "m-engine", &report(Reason::NoKey, &[], 0), None);
        assert_eq!(types(&metrics)[..2], ["reason gauge", "reconciles counter"]);
        metrics.show(
            "ns",
            "m-engine",
            &report(Reason::Skewed, &[("zone-a", 3)], 3),
            Some(&worst_loss()),
        );
        metrics.rebalance_moves("ns", "m-engine", Some(1));
        let replicas = [
            "instances gauge",
            "skew gauge",
            "reason gauge",
            "rebalance_moves gauge",
            "worst_domain_left_serving gauge",
            "worst_domain_replaceable gauge",
        ];
        assert_eq!(types(&metrics), [&replicas[..], &own[..]].concat());
    }

    #[test]
    fn reconciles_errors_and_durations_are_counted() {
        let metrics = Metrics::default();
        metrics.reconciled(Duration::from_millis(2));
        metrics.failed("api_500", Duration::from_millis(3));
        let text = metrics.encode();
        for line in [
            "ome_spread_reconciles_total 2",
            r#"ome_spread_reconcile_errors_total{error="api_500"} 1"#,
            "ome_spread_reconcile_duration_seconds_count 2",
            "# EOF",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
    }
}
