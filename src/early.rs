//! P1 and P2 without reading the whole request. Most requests that reach the policy at all are
//! OMENative pods, but those that are not (another kind, another operation, a pod of another
//! workload when the objectSelector is left out) need nothing but their kind, operation and one
//! label. These are read from the start of the text, as the policy-server writes it (`kind` and
//! `operation` before `object`, each key once), and the request passes as soon as they say it
//! does. Anything else, or anything unexpected on the way, goes to the full path, which checks
//! every byte: an early answer is only ever "accepted, unchanged", so nothing is returned that
//! was not checked.

use crate::labels;
use crate::raw;
use crate::rules::Unchanged;

/// `Some` when the request passes unchanged by P1 or P2, read from as little of it as needed.
pub fn unchanged(payload: &[u8]) -> Option<Unchanged> {
    let mut reader = Reader { bytes: payload, at: 0 };
    let (mut verdict, mut read_whole) = (None, true);
    reader.fields(|reader, key| {
        if key != b"request" {
            return reader.skip().map(|()| true);
        }
        let (found, at_object) = request(reader)?;
        verdict = found;
        // Stopped at the object: the rest is not read. Otherwise, read on to the end.
        read_whole = !at_object;
        Some(read_whole)
    })?;
    if read_whole {
        reader.space();
        if reader.at != payload.len() {
            return None;
        }
    }
    verdict
}

/// The admission request: its kind and operation (P1), then the pod's managed-by label (P2); and
/// whether the answer came at the object, before the end of the request.
fn request(reader: &mut Reader<'_>) -> Option<(Option<Unchanged>, bool)> {
    let (mut group, mut version, mut kind, mut operation) = (&b""[..], &b""[..], &b""[..], &b""[..]);
    let (mut seen_kind, mut seen_operation) = (false, false);
    let mut verdict = None;
    let pod_create = |group: &[u8], version: &[u8], kind: &[u8], operation: &[u8]| {
        group.is_empty() && version == b"v1" && kind == b"Pod" && operation == b"CREATE"
    };
    reader.fields(|reader, key| match key {
        b"kind" => {
            seen_kind = true;
            reader
                .fields(|reader, key| {
                    match key {
                        b"group" => group = reader.string()?,
                        b"version" => version = reader.string()?,
                        b"kind" => kind = reader.string()?,
                        _ => reader.skip()?,
                    }
                    Some(true)
                })
                .map(|()| true)
        }
        b"operation" => reader.string().map(|value| {
            (operation, seen_operation) = (value, true);
            true
        }),
        // Read as the full path reads it, so that a request it refuses is not passed here.
        b"namespace" => reader.string().map(|_| true),
        // Written after them by the policy-server; otherwise the full path reads the rest.
        b"object" if !(seen_kind && seen_operation) => None,
        b"object" if !pod_create(group, version, kind, operation) => {
            verdict = Some(Unchanged::NotPodCreate);
            Some(false)
        }
        b"object" => {
            verdict = Some(pod_labels(reader)?);
            Some(false)
        }
        _ => reader.skip().map(|()| true),
    })?;
    match verdict {
        Some(_) => Some((verdict, true)),
        None if !pod_create(group, version, kind, operation) => Some((Some(Unchanged::NotPodCreate), false)),
        None => Some((None, false)),
    }
}

/// `NotOmeNative` when the pod's `ome.io/managed-by` is absent or another string; `None` (the
/// full path) when the pod is OMENative or its metadata or labels are not plain objects.
fn pod_labels(reader: &mut Reader<'_>) -> Option<Unchanged> {
    let mut ome_native = false;
    reader.fields(|reader, key| {
        if key != b"metadata" {
            return reader.skip().map(|()| true);
        }
        reader.fields(|reader, key| {
            if key != b"labels" {
                return reader.skip().map(|()| true);
            }
            reader.fields(|reader, key| {
                if key != labels::MANAGED_BY.as_bytes() {
                    return reader.skip().map(|()| true);
                }
                ome_native = reader.string()? == labels::OME_NATIVE.as_bytes();
                Some(false)
            })?;
            Some(false)
        })?;
        Some(false)
    })?;
    (!ome_native).then_some(Unchanged::NotOmeNative)
}

/// Reads JSON text from the start, bounds-checked, giving up (`None`) on anything it does not
/// expect rather than guessing.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn space(&mut self) {
        while self.bytes.get(self.at).is_some_and(u8::is_ascii_whitespace) {
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

    /// Calls `each` on every key of the object here, with the reader at its value, until `each`
    /// returns `false` (stop: the rest of the object is not read) or the object ends.
    fn fields(&mut self, mut each: impl FnMut(&mut Self, &'a [u8]) -> Option<bool>) -> Option<()> {
        self.expect(b'{')?;
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            let key = self.string()?;
            self.expect(b':')?;
            if !each(self, key)? {
                return Some(());
            }
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
            r#"{"uid": "1", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"}, "operation": "CREATE", "object": {"#,
        );
        assert_eq!(unchanged(&deployment), Some(Unchanged::NotPodCreate));
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
        // The spec is never read: a pod cut off after its labels passes as it would whole.
        let cut = pod(r#"{"labels": {"app": "web"}}"#);
        assert_eq!(unchanged(&cut[..cut.len() - 20]), Some(Unchanged::NotOmeNative));
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
