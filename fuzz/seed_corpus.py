"""Seeds the fuzzers' corpora from the rule table's fixtures (tests/data/cases)."""
import json, pathlib

root = pathlib.Path(__file__).resolve().parent
corpus = root / "corpus" / "validate_bytes"
corpus.mkdir(parents=True, exist_ok=True)
for case in sorted((root.parent / "tests" / "data" / "cases").iterdir()):
    review = json.loads((case / "request.json").read_text())
    settings = json.loads((case / "settings.json").read_text())
    payload = json.dumps({"settings": settings, "request": review["request"]}).encode()
    for mode in range(3):
        (corpus / f"{case.name}-{mode}").write_bytes(bytes([mode]) + payload)
