//! P1 and P2 without parsing the whole request. Most requests that reach the policy at all are
//! OMENative pods, but those that are not (another kind, another operation, a pod of another
//! workload when the objectSelector is left out) need nothing but their kind, operation and one
//! label. These are read as the policy-server writes them (`kind` and `operation` before
//! `object`), and the rest of the text is skipped, its strings and brackets followed to the end
//! but its values not parsed. Anything unexpected on the way goes to the full path, which checks
//! every byte: a key read here that comes twice (a full parse keeps the last), text that does not
//! end where the request does (a truncated request), escapes in the fields read, another order.
//! An early answer is only ever "accepted, unchanged". The values skipped are not parsed: the
//! policy-server writes the request with serde_json, so they are well formed; for text that is not
//! (a bad token inside a skipped value, an invalid escape or UTF-8 there) this path accepts where
//! the full path would refuse the request as malformed, and nothing of it is sent back.

use ome_spread_core::labels;
use ome_spread_core::rules::Unchanged;

use crate::raw;

/// `Some` when the request passes unchanged by P1 or P2.
pub fn unchanged(payload: &[u8]) -> Option<Unchanged> {
    let mut reader = Reader { bytes: payload, at: 0 };
    let (mut verdict, mut seen_request, mut seen_settings) = (None, false, false);
    reader.fields(|reader, key| match key {
        b"request" => {
            once(&mut seen_request)?;
            verdict = request(reader)?;
            Some(())
        }
        // Its value is skipped, but the full path refuses it twice.
        b"settings" => {
            once(&mut seen_settings)?;
            reader.skip()
        }
        _ => reader.skip(),
    })?;
    reader.space();
    (reader.at == payload.len()).then_some(verdict)?
}

/// The admission request: its kind and operation (P1), then the pod's managed-by label (P2).
fn request(reader: &mut Reader<'_>) -> Option<Option<Unchanged>> {
    let (mut group, mut version, mut kind, mut operation) = (&b""[..], &b""[..], &b""[..], &b""[..]);
    let (mut seen_kind, mut seen_operation, mut seen_namespace, mut seen_object) = (false, false, false, false);
    let mut verdict = None;
    let pod_create = |group: &[u8], version: &[u8], kind: &[u8], operation: &[u8]| {
        group.is_empty() && version == b"v1" && kind == b"Pod" && operation == b"CREATE"
    };
    reader.fields(|reader, key| match key {
        b"kind" => {
            once(&mut seen_kind)?;
            let (mut seen_group, mut seen_version, mut seen_kind) = (false, false, false);
            reader.fields(|reader, key| {
                match key {
                    b"group" => (group, _) = (reader.string()?, once(&mut seen_group)?),
                    b"version" => (version, _) = (reader.string()?, once(&mut seen_version)?),
                    b"kind" => (kind, _) = (reader.string()?, once(&mut seen_kind)?),
                    _ => reader.skip()?,
                }
                Some(())
            })
        }
        b"operation" => {
            once(&mut seen_operation)?;
            operation = reader.string()?;
            Some(())
        }
        // Read as the full path reads it, so that a request it refuses is not passed here.
        b"namespace" => {
            once(&mut seen_namespace)?;
            reader.string().map(|_| ())
        }
        // Written after them by the policy-server; otherwise the full path reads the request.
        b"object" if !(seen_kind && seen_operation) => None,
        b"object" => {
            once(&mut seen_object)?;
            if pod_create(group, version, kind, operation) {
                verdict = pod_labels(reader)?;
                Some(())
            } else {
                verdict = Some(Unchanged::NotPodCreate);
                reader.skip()
            }
        }
        _ => reader.skip(),
    })?;
    match verdict {
        None if !seen_object && !pod_create(group, version, kind, operation) => Some(Some(Unchanged::NotPodCreate)),
        verdict => Some(verdict),
    }
}

/// `NotOmeNative` when the pod's `ome.io/managed-by` is absent or another string; `None` (the
/// full path) when the pod is OMENative or its metadata or labels are not plain objects.
fn pod_labels(reader: &mut Reader<'_>) -> Option<Option<Unchanged>> {
    let (mut ome_native, mut seen_metadata, mut seen_labels, mut seen_managed_by) = (false, false, false, false);
    reader.fields(|reader, key| {
        if key != b"metadata" {
            return reader.skip();
        }
        once(&mut seen_metadata)?;
        reader.fields(|reader, key| {
            if key != b"labels" {
                return reader.skip();
            }
            once(&mut seen_labels)?;
            reader.fields(|reader, key| {
                if key != labels::MANAGED_BY.as_bytes() {
                    return reader.skip();
                }
                once(&mut seen_managed_by)?;
                ome_native = reader.string()? == labels::OME_NATIVE.as_bytes();
                Some(())
            })
        })
    })?;
    Some((!ome_native).then_some(Unchanged::NotOmeNative))
}

/// A key read here must come once: a full parse keeps the last of a repeated key, this reader
/// the first, so a repeat goes to the full path.
fn once(seen: &mut bool) -> Option<()> {
    (!std::mem::replace(seen, true)).then_some(())
}

/// Reads JSON text from the start, bounds-checked, giving up (`None`) on anything it does not
/// expect rather than guessing.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn space(&mut self) {
        while self.bytes.get(self.at).copied().is_some_and(raw::is_space) {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.bytes.get(self.at).copied()
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string without escapes, as its bytes; escapes are left to the full path.
    fn string(&mut self) -> Option<&'a [u8]> {
        self.expect(b'"')?;
        let rest = self.bytes.get(self.at..)?;
        let end = memchr::memchr2(b'"', b'\\', rest)?;
        (rest[end] == b'"').then(|| {
            self.at += end + 1;
            &rest[..end]
        })
    }

    fn skip(&mut self) -> Option<()> {
        self.space();
        let end = raw::skip_value(self.bytes, self.at);
        // An unterminated value runs to the end of the text: nothing can follow it.
        (end > self.at && end < self.bytes.len()).then(|| self.at = end)
    }

    /// Calls `each` on every key of the object here, with the reader at its value, which `each`
    /// reads or skips, to the end of the object.
    fn fields(&mut self, mut each: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            each(self, key)?;
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(request: &str) -> Vec<u8> {
        format!(r#"{{"settings": {{}}, "request": {request}}}"#).into_bytes()
    }

    #[test]
    fn p1_other_kinds_and_operations_pass_at_the_object() {
        let deployment = request(
            r#"{"uid": "1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "operation": "CREATE", "object": {"spec": {"replicas": 2}}}"#,
        );
        assert_eq!(unchanged(&deployment), Some(Unchanged::NotPodCreate));
        assert_eq!(unchanged(&deployment[..deployment.len() - 3]), None, "cut short");
        let update =
            request(r#"{"kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "UPDATE", "object": {}}"#);
        assert_eq!(unchanged(&update), Some(Unchanged::NotPodCreate));
        let no_object = request(r#"{"kind": {"version": "v1", "kind": "Pod"}, "operation": "DELETE"}"#);
        assert_eq!(unchanged(&no_object), Some(Unchanged::NotPodCreate));
        assert_eq!(unchanged(br#" {"request": {}} "#), Some(Unchanged::NotPodCreate));
    }

    #[test]
    fn p2_pods_of_other_workloads_pass_at_their_labels() {
        let pod = |metadata: &str| {
            request(&format!(
                r#"{{"kind": {{"group": "", "version": "v1", "kind": "Pod"}}, "operation": "CREATE", "userInfo": {{"groups": ["a", "b"]}},
                "object": {{"apiVersion": "v1", "metadata": {metadata}, "spec": {{"containers": [{{"name": "x"}}]}}}}}}"#
            ))
        };
        assert_eq!(
            unchanged(&pod(r#"{"name": "web", "labels": {"app": "web"}}"#)),
            Some(Unchanged::NotOmeNative)
        );
        assert_eq!(unchanged(&pod(r#"{"name": "web"}"#)), Some(Unchanged::NotOmeNative));
        assert_eq!(
            unchanged(&pod(r#"{"labels": {"ome.io/managed-by": "Helm", "x": 1}}"#)),
            Some(Unchanged::NotOmeNative)
        );
    }

    #[test]
    fn repeated_keys_and_truncated_requests_go_to_the_full_path() {
        let pod = |kind: &str, metadata: &str| {
            request(&format!(
                r#"{{"kind": {kind}, "operation": "CREATE", "object": {{"metadata": {metadata}, "spec": {{"containers": []}}}}}}"#
            ))
        };
        let pod_kind = r#"{"group": "", "version": "v1", "kind": "Pod"}"#;
        for (kind, metadata) in [
            (
                pod_kind,
                r#"{"labels": {"ome.io/managed-by": "Helm", "ome.io/managed-by": "OMENative"}}"#,
            ),
            (
                pod_kind,
                r#"{"labels": {"app": "web"}, "labels": {"ome.io/managed-by": "OMENative"}}"#,
            ),
            (
                r#"{"group": "", "version": "v1", "kind": "Pod", "kind": "Pod"}"#,
                r#"{"labels": {}}"#,
            ),
        ] {
            assert_eq!(unchanged(&pod(kind, metadata)), None, "{kind} {metadata}");
        }
        let settings_twice = br#"{"settings": {}, "settings": {}, "request": {"kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "operation": "CREATE", "object": {}}}"#;
        assert_eq!(unchanged(settings_twice), None, "the full path refuses settings twice");
        let form_feed =
            b"{\"request\": {\"kind\": {\"kind\": \"Deployment\"}, \"operation\": \"CREATE\", \"object\": {}}}\x0c";
        assert_eq!(unchanged(form_feed), None, "a form feed is no JSON whitespace");
        let twice = request(
            r#"{"kind": {"version": "v1", "kind": "Pod"}, "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "operation": "CREATE", "object": {}}"#,
        );
        assert_eq!(unchanged(&twice), None);
        // The spec is skipped, not parsed, but a pod cut off after its labels is not passed.
        let whole = pod(pod_kind, r#"{"labels": {"app": "web"}}"#);
        assert_eq!(unchanged(&whole), Some(Unchanged::NotOmeNative));
        for cut in 1..whole.len() {
            assert_eq!(unchanged(&whole[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn anything_else_goes_to_the_full_path() {
        let pod = |object: &str| {
            request(&format!(
                r#"{{"kind": {{"group": "", "version": "v1", "kind": "Pod"}}, "operation": "CREATE", "object": {object}}}"#
            ))
        };
        for object in [
            r#"{"metadata": {"labels": {"ome.io/managed-by": "OMENative"}}}"#,
            r#"{"metadata": {"labels": {"ome.io/managed-by": 1}}}"#,
            r#"{"metadata": {"labels": {"ome.io/managed-by": "OME\u004eative"}}}"#,
            r#"{"metadata": {"labels": null}}"#,
            r#"{"metadata": {"labels": "x"}}"#,
            r#"{"metadata": null}"#,
            r#"{"metadata": "x"}"#,
            r#"null"#,
            r#""pod""#,
            r#"{"metadata": {"labels": {"app": "web", "#,
        ] {
            assert_eq!(unchanged(&pod(object)), None, "{object}");
        }
        let kind_after_object =
            request(r#"{"object": {"metadata": {}}, "kind": {"version": "v1", "kind": "Pod"}, "operation": "CREATE"}"#);
        assert_eq!(unchanged(&kind_after_object), None, "kind and operation come first");
        for payload in [
            &b""[..],
            b"null",
            b"[{}]",
            br#"{"request": "#,
            br#"{"settings": {}}"#,
            br#"{"request": {"operation": 1, "object": {}}}"#,
            br#"{"request": {"namespace": 1, "kind": {}, "object": {}}}"#,
            br#"{"request": {"kind": {"kind": "Pod\"s"}, "object": {}}}"#,
            br#"{"request" {}}"#,
            br#"{"request": {}} x"#,
            br#"{"request": {}, "settings": {"#,
        ] {
            assert_eq!(unchanged(payload), None, "{}", String::from_utf8_lossy(payload));
        }
    }
}
