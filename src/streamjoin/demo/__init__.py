"""The bundled demo: seed examples run on the embedded default (no broker), output printed."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..conformance.runner import produce_inputs
from ..runtime.engine import Engine

HERE = Path(__file__).parent


def run_demo(spark, home: str) -> int:
    demo_home = os.path.join(home, "demo")
    shutil.rmtree(demo_home, ignore_errors=True)
    engine = Engine(spark, home=demo_home)
    script = (HERE / "demo.sql").read_text()
    print("-- script\n" + script)
    queries = engine.execute(script)
    produce_inputs(engine.store, json.loads((HERE / "demo_inputs.json").read_text()))
    engine.process_all_available()
    for q in queries:
        print(f"-- {q.query_id} -> topic {q.topic}")
        for r in engine.store.records(q.topic):
            key = r.key.decode() if r.key is not None else None
            value = json.loads(r.value) if r.value is not None else None
            print(f"   key={key!s:6} ts={r.timestamp:<4} value={json.dumps(value)}")
    engine.stop()
    return 0
