//! OME v1.3's pod labels, and Kubernetes' rules for label keys and values.

pub const MANAGED_BY: &str = "ome.io/managed-by";
pub const OME_NATIVE: &str = "OMENative";
pub const INFERENCE_SERVICE: &str = "ome.io/inferenceservice";
pub const COMPONENT: &str = "component";
pub const RUNNER: &str = "ome.io/runner";
pub const INSTANCE_INDEX: &str = "ome.io/instance-index";
/// A pod's place in its runner, as its name ends: a worker's rank, a one-pod runner's slot.
pub const POD_ORDINAL: &str = "ome.io/pod-ordinal";
pub const INSTANCE_INCARNATION: &str = "ome.io/instance-incarnation";
pub const REVISION_HASH: &str = "ome.io/revision-hash";
/// The scheduler-plugins gang label on every pod of a multi-pod Instance (`render.go`).
pub const POD_GROUP: &str = "scheduling.x-k8s.io/pod-group";

/// Checks a label key as the API server does (a qualified name): an optional DNS-1123 subdomain
/// prefix and `/`, then a name of at most 63 characters. Returns why the key is not valid.
pub fn check_key(key: &str) -> Result<(), &'static str> {
    match key.split_once('/') {
        Some((prefix, name)) => check_dns_subdomain(prefix).and_then(|()| check_name(name)),
        None => check_name(key),
    }
}

/// Checks a label value: empty, or a name of at most 63 characters.
pub fn check_value(value: &str) -> Result<(), &'static str> {
    if value.is_empty() { Ok(()) } else { check_name(value) }
}

fn check_name(name: &str) -> Result<(), &'static str> {
    let alphanumeric = |c: char| c.is_ascii_alphanumeric();
    let allowed = |c: char| alphanumeric(c) || matches!(c, '-' | '_' | '.');
    if name.is_empty() {
        Err("the name part is empty")
    } else if name.len() > 63 {
        Err("the name part is longer than 63 characters")
    } else if !(name.starts_with(alphanumeric) && name.ends_with(alphanumeric) && name.chars().all(allowed)) {
        Err("a name must be alphanumeric characters, '-', '_' or '.', and start and end with an alphanumeric character")
    } else {
        Ok(())
    }
}

fn check_dns_subdomain(prefix: &str) -> Result<(), &'static str> {
    if prefix.is_empty() || prefix.len() > 253 {
        return Err("the prefix must be a DNS subdomain of 1 to 253 characters");
    }
    let alphanumeric = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    let label_ok = |label: &str| {
        (1..=63).contains(&label.len())
            && (label.starts_with(alphanumeric) && label.ends_with(alphanumeric))
            && label.chars().all(|c| alphanumeric(c) || c == '-')
    };
    if prefix.split('.').all(label_ok) {
        Ok(())
    } else {
        Err("the prefix must be a DNS subdomain: lower-case alphanumeric characters, '-' or '.'")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_that_kubernetes_accepts() {
        for key in [
            "topology.kubernetes.io/zone",
            "nvidia.com/gpu.clique",
            "rack",
            "kubernetes.io/hostname",
            "a/b",
            "x_y.z-1",
        ] {
            assert_eq!(check_key(key), Ok(()), "{key}");
        }
    }

    #[test]
    fn keys_that_kubernetes_refuses() {
        let long_name = "a".repeat(64);
        let long_prefix = format!("{}/zone", "a".repeat(254));
        for key in [
            "",
            "zone ",
            "my zone",
            "/zone",
            "zone/",
            "Topology.io/zone",
            "a/b/c",
            "-zone",
            "zone-",
            "zöne",
            long_name.as_str(),
            long_prefix.as_str(),
        ] {
            assert!(check_key(key).is_err(), "{key:?} must be refused");
        }
    }

    #[test]
    fn values() {
        assert_eq!(check_value(""), Ok(()));
        assert_eq!(check_value("qwen3-0-6b"), Ok(()));
        assert!(check_value("a b").is_err());
        assert!(check_value(&"v".repeat(64)).is_err());
    }
}
