#!/usr/bin/env python3
"""An evaluation harness against a running main node: lm-evaluation-harness's
`local-completions` model (the OpenAI-style completions API with echo and
logprobs) on two tasks built from tests/data/heldout.txt, offline:

  heldout_mc    multiple choice: a text's first words, its true next words
                against the next words of three other texts (loglikelihood,
                scored through `echo` + `logprobs`);
  heldout_gen   greedy generation of the next words (generate_until).

    python3 tests/clients/eval_harness.py http://127.0.0.1:8080/v1 MODEL.gguf OUT_DIR

The harness tokenizes with the model's own vocabulary (a Hugging Face tokenizer
made from the GGUF by `transformers`) and sends token ids. Every loglikelihood
request is recorded in OUT_DIR/loglikelihood.jsonl as
{"context": [ids], "continuation": [ids], "loglikelihood": x, "is_greedy": b}
so that a test can recompute each number with the single-process engine; the
harness's scores go to OUT_DIR/results.json.

Exit 0: the harness ran both tasks; 1: it failed (the message says why); 77:
lm-eval or transformers is not installed (development-time tools:
`pip install lm-eval transformers`). Run by tests/cluster/eval_harness_test.cpp
against the process testbed.
"""
import json
import os
import re
import sys
import tempfile
import urllib.request

try:
    import lm_eval
    from lm_eval.api.registry import register_model
    from lm_eval.models.openai_completions import LocalCompletionsAPI
    from transformers import AutoTokenizer
except ImportError as e:  # not installed: skip
    print(f"skipped: {e}")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
HELDOUT = os.path.join(HERE, "..", "data", "heldout.txt")
RECORDS = []


@register_model("odmoe-recording-completions")
class RecordingCompletions(LocalCompletionsAPI):
    """local-completions that keeps the token ids of every scored request."""

    def _loglikelihood_tokens(self, requests, **kwargs):
        out = []
        for req in requests:  # one at a time: each answer stays with its ids
            (ll, greedy), = super()._loglikelihood_tokens([req], **kwargs)
            RECORDS.append({"context": list(req[1]), "continuation": list(req[2]),
                            "loglikelihood": ll, "is_greedy": bool(greedy)})
            out.append((ll, greedy))
        return out


def texts():
    """The held-out file's entries (separated by '%' lines), whitespace folded."""
    with open(HELDOUT, encoding="utf-8") as f:
        entries = f.read().split("\n%\n")
    out = []
    for e in entries:
        words = re.sub(r"\s+", " ", e).strip().split(" ")
        if len(words) >= 14:
            out.append(words)
    return out


def make_tasks(task_dir, n_docs=24):
    entries = texts()[:n_docs + 3]
    mc, gen = [], []
    for i in range(n_docs):
        words = entries[i]
        cut = len(words) // 2
        context = " ".join(words[:cut])
        truth = " " + " ".join(words[cut:cut + 5])
        others = []
        for k in range(1, 4):
            w = entries[(i + k * 7) % len(entries)]
            c = len(w) // 2
            others.append(" " + " ".join(w[c:c + 5]))
        label = i % 4
        choices = others[:label] + [truth] + others[label:]
        mc.append({"context": context, "choices": choices, "label": label})
        gen.append({"context": context, "continuation": truth})
    for name, rows in (("heldout_mc", mc), ("heldout_gen", gen)):
        with open(os.path.join(task_dir, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    common = (f"dataset_path: json\ndataset_kwargs:\n  data_files:\n"
              f"    test: {task_dir}/{{name}}.jsonl\ntest_split: test\n")
    with open(os.path.join(task_dir, "heldout_mc.yaml"), "w") as f:
        f.write("task: heldout_mc\n" + common.format(name="heldout_mc") +
                "output_type: multiple_choice\n"
                "doc_to_text: \"{{context}}\"\n"
                "doc_to_choice: \"{{choices}}\"\n"
                "doc_to_target: \"{{label}}\"\n"
                "target_delimiter: \"\"\n"
                "metric_list:\n  - metric: acc\n  - metric: acc_norm\n")
    with open(os.path.join(task_dir, "heldout_gen.yaml"), "w") as f:
        f.write("task: heldout_gen\n" + common.format(name="heldout_gen") +
                "output_type: generate_until\n"
                "doc_to_text: \"{{context}}\"\n"
                "doc_to_target: \"{{continuation}}\"\n"
                "target_delimiter: \"\"\n"
                "generation_kwargs:\n  until: [\"\\n\"]\n  max_gen_toks: 8\n"
                "  temperature: 0\n  do_sample: false\n"
                "metric_list:\n  - metric: exact_match\n")


def main(base_url, model_path, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with urllib.request.urlopen(f"{base_url}/models") as r:  # the id the server serves
        model_id = json.load(r)["data"][0]["id"]
    with tempfile.TemporaryDirectory() as tmp:
        # The model's vocabulary as a Hugging Face tokenizer (from the GGUF).
        gguf_dir = os.path.join(tmp, "gguf")
        os.makedirs(gguf_dir)
        os.symlink(os.path.abspath(model_path), os.path.join(gguf_dir, "model.gguf"))
        tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file="model.gguf")
        tok_dir = os.path.join(tmp, "tokenizer")
        tok.save_pretrained(tok_dir)
        task_dir = os.path.join(tmp, "tasks")
        os.makedirs(task_dir)
        make_tasks(task_dir)
        from lm_eval.tasks import TaskManager
        results = lm_eval.simple_evaluate(
            model="odmoe-recording-completions",
            model_args=(f"model={model_id},base_url={base_url}/completions,tokenizer={tok_dir},"
                        "tokenizer_backend=huggingface,tokenized_requests=True,"
                        "num_concurrent=1,max_retries=1,max_length=256"),
            tasks=["heldout_mc", "heldout_gen"],
            task_manager=TaskManager(include_path=task_dir),
            batch_size=1,
            log_samples=False,
        )
    if results is None or "results" not in results:
        print("FAILED: the harness returned no results")
        return 1
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results["results"], f, indent=2, default=str)
    with open(os.path.join(out_dir, "loglikelihood.jsonl"), "w") as f:
        for r in RECORDS:
            f.write(json.dumps(r) + "\n")
    mc, gen = results["results"]["heldout_mc"], results["results"]["heldout_gen"]
    print(f"heldout_mc: acc {mc['acc,none']:.4f}, acc_norm {mc['acc_norm,none']:.4f}; "
          f"heldout_gen: exact_match {gen['exact_match,none']:.4f}; "
          f"{len(RECORDS)} loglikelihood requests recorded")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
