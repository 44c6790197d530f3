//! A Prometheus histogram as its text exposition gives it, and its quantiles as Prometheus'
//! `histogram_quantile` reads them: the controller's own event-to-condition time (`make
//! bench-churn`, `make bench-cluster`) and kube-apiserver's time in the webhook (`make
//! bench-cluster`).

/// Cumulative counts by upper bound, the bounds ascending (+Inf last).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Buckets(Vec<(f64, f64)>);

impl Buckets {
    /// The buckets of the histogram `name` in the exposition `text`, summed over its series
    /// whose labels contain `matching`. None there: no buckets.
    pub fn read(text: &str, name: &str, matching: &str) -> Buckets {
        let prefix = format!("{name}_bucket{{");
        let mut buckets: Vec<(f64, f64)> = Vec::new();
        for line in text.lines().filter(|l| l.starts_with(&prefix) && l.contains(matching)) {
            let (labels, count) = line.rsplit_once(' ').expect("a sample");
            let le = labels
                .split("le=\"")
                .nth(1)
                .and_then(|l| l.split('"').next())
                .expect("a bucket");
            // Rust reads "+Inf" as f64::INFINITY, as Prometheus writes it.
            let le: f64 = le.parse().expect("a bound");
            let count: f64 = count.parse().expect("a count");
            match buckets.iter_mut().find(|(bound, _)| *bound == le) {
                Some((_, total)) => *total += count,
                None => buckets.push((le, count)),
            }
        }
        buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        Buckets(buckets)
    }

    /// What was counted after `before` was read, as Prometheus' `increase` takes it.
    pub fn since(&self, before: &Buckets) -> Buckets {
        let earlier = |bound: f64| before.0.iter().find(|(b, _)| *b == bound).map_or(0.0, |(_, c)| *c);
        Buckets(
            self.0
                .iter()
                .map(|&(bound, count)| (bound, count - earlier(bound)))
                .collect(),
        )
    }

    /// The `q`-quantile in milliseconds, interpolated within its bucket as `histogram_quantile`
    /// does (in the +Inf bucket: the highest finite bound); None with nothing counted.
    pub fn quantile_ms(&self, q: f64) -> Option<f64> {
        let total = self.0.last().map_or(0.0, |b| b.1);
        if total == 0.0 {
            return None;
        }
        let rank = q * total;
        let (mut lower, mut below) = (0.0, 0.0);
        for &(bound, count) in &self.0 {
            if count >= rank {
                let upper = if bound.is_finite() { bound } else { lower };
                return Some(1000.0 * (lower + (upper - lower) * (rank - below) / (count - below).max(1.0)));
            }
            (lower, below) = (bound, count);
        }
        None
    }

    /// The `q`-quantile as the benchmarks print it ("12.3 ms"), `-` with nothing counted.
    pub fn quantile_shown(&self, q: f64) -> String {
        self.quantile_ms(q).map_or("-".into(), |ms| format!("{ms:.1} ms"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXPOSITION: &str = "# TYPE t histogram
t_sum 0.2
t_count 4
t_bucket{le=\"0.001\"} 0
t_bucket{le=\"0.002\"} 2
t_bucket{le=\"0.004\"} 4
t_bucket{le=\"+Inf\"} 4
other_bucket{le=\"0.001\"} 9
";

    #[test]
    fn quantiles_are_interpolated_within_their_bucket() {
        let buckets = Buckets::read(EXPOSITION, "t", "");
        // The 2nd of 4 is the last of the bucket (1, 2] ms; the 3.96th is 0.98 of the way
        // through the 2 in (2, 4] ms.
        assert_eq!(buckets.quantile_ms(0.5), Some(2.0));
        assert_eq!(buckets.quantile_ms(0.99), Some(3.96));
        assert_eq!(Buckets::read(EXPOSITION, "absent", "").quantile_ms(0.5), None);
    }

    #[test]
    fn what_was_counted_since_an_earlier_reading_is_the_difference() {
        let earlier = "t_bucket{le=\"0.002\"} 2\nt_bucket{le=\"0.004\"} 2\nt_bucket{le=\"+Inf\"} 2\n";
        let since = Buckets::read(EXPOSITION, "t", "").since(&Buckets::read(earlier, "t", ""));
        assert_eq!(
            since,
            Buckets(vec![(0.001, 0.0), (0.002, 0.0), (0.004, 2.0), (f64::INFINITY, 2.0)])
        );
        // Both in (2, 4] ms: the median is half way through it.
        assert_eq!(since.quantile_ms(0.5), Some(3.0));
        assert_eq!(since.since(&since).quantile_ms(0.5), None, "nothing counted");
    }

    /// Summed over the series the labels select; a value past the last finite bound is read as
    /// that bound.
    #[test]
    fn series_are_summed_and_the_inf_bucket_reads_as_the_last_bound() {
        let text = "w_bucket{name=\"a\",le=\"0.1\"} 1\nw_bucket{name=\"a\",le=\"+Inf\"} 3\n\
                    w_bucket{name=\"b\",le=\"0.1\"} 1\nw_bucket{name=\"b\",le=\"+Inf\"} 1\n";
        assert_eq!(Buckets::read(text, "w", "name=\"a\"").quantile_ms(0.99), Some(100.0));
        assert_eq!(Buckets::read(text, "w", "").quantile_ms(0.5), Some(100.0));
        assert_eq!(Buckets::read(text, "w", "").quantile_ms(0.25), Some(50.0));
    }
}
