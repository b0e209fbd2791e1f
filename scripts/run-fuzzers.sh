#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan+UBSan) in build-fuzz/ and runs each one for
# SECONDS (default 20) from a small generated seed corpus. Exits non-zero on any crash.
#   scripts/run-fuzzers.sh [SECONDS]
# Env: FERRY_FUZZ_BUILD_DIR (default <repo>/build-fuzz), FERRY_FUZZ_JOBS (default 2),
#      FERRY_ASSETS (shared assets; stories260K.gguf and the HF safetensors join the seeds, the
#      chat templates under chat-templates/ seed template_fuzz).
set -euo pipefail

fuzz_seconds="${1:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${FERRY_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${FERRY_FUZZ_JOBS:-2}"
assets="${FERRY_ASSETS:-$root/../shared/assets}"

CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFERRY_BUILD_FUZZERS=ON -DFERRY_SANITIZE=ON -DFERRY_BUILD_TESTS=OFF >/dev/null
ninja -C "$build" -j "$jobs" gguf_fuzz safetensors_fuzz template_fuzz tokenizer_fuzz openai_request_fuzz \
  gbnf_fuzz regex_fuzz json_schema_fuzz tool_call_fuzz block_file_fuzz

seeds="$build/fuzz-seeds"
corpus="$build/fuzz-corpus"
artifacts="$build/fuzz-artifacts"
rm -rf "$seeds"
mkdir -p "$seeds/gguf" "$seeds/safetensors" "$seeds/template" "$seeds/tokenizer" "$seeds/openai_request" "$corpus/gguf" \
  "$corpus/safetensors" "$corpus/template" "$corpus/tokenizer" "$corpus/openai_request" "$artifacts"
for t in gbnf regex json_schema tool_call block_file; do mkdir -p "$seeds/$t" "$corpus/$t"; done

# Tiny valid files: every GGUF value type, a nested array, custom alignment, three tensors;
# a safetensors file with metadata and two tensors.
python3 - "$seeds" <<'PY'
import json, struct, sys
out = sys.argv[1]

def s(x):
    b = x.encode()
    return struct.pack("<Q", len(b)) + b

def kv(key, t, payload):
    return s(key) + struct.pack("<I", t) + payload

def gguf(alignment):
    kvs = [
        kv("general.architecture", 8, s("llama")),
        kv("u8", 0, struct.pack("<B", 7)), kv("i8", 1, struct.pack("<b", -7)),
        kv("u16", 2, struct.pack("<H", 700)), kv("i16", 3, struct.pack("<h", -700)),
        kv("u32", 4, struct.pack("<I", 70000)), kv("i32", 5, struct.pack("<i", -70000)),
        kv("f32", 6, struct.pack("<f", 1e-5)), kv("bool", 7, struct.pack("<B", 1)),
        kv("u64", 10, struct.pack("<Q", 1 << 40)), kv("i64", 11, struct.pack("<q", -(1 << 40))),
        kv("f64", 12, struct.pack("<d", 0.5)),
        kv("tokens", 9, struct.pack("<IQ", 8, 3) + s("a") + s("bb") + s("")),
        kv("nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 5, 2) + struct.pack("<ii", 1, -1)),
    ]
    if alignment != 32:
        kvs.append(kv("general.alignment", 4, struct.pack("<I", alignment)))
    tensors = [("token_embd.weight", [4, 2], 0, 32), ("blk.0.attn_q.weight", [32, 1], 8, 34),
               ("output_norm.weight", [4], 1, 8)]
    infos, data, offset = b"", b"", 0
    for name, ne, typ, nbytes in tensors:
        infos += s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        infos += struct.pack("<IQ", typ, offset)
        blob = bytes((i * 37) & 0xFF for i in range(nbytes))
        pad = (-nbytes) % alignment
        data += blob + b"\0" * pad
        offset += nbytes + pad
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs)) + b"".join(kvs) + infos
    head += b"\0" * ((-len(head)) % alignment)
    return head + data

open(f"{out}/gguf/tiny32.gguf", "wb").write(gguf(32))
open(f"{out}/gguf/tiny64.gguf", "wb").write(gguf(64))
header = {"__metadata__": {"format": "pt"},
          "a": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
          "b": {"dtype": "BF16", "shape": [3], "data_offsets": [16, 22]}}
h = json.dumps(header).encode()
h += b" " * ((-len(h)) % 8)
# A prefix-cache block file (kv/block_file.h): magic, version, fingerprint, hash, payload, xxh64.
# The checksum here is a placeholder; the fuzzer's mutations explore the parser either way.
payload = bytes(range(64))
head = struct.pack("<IIQQQ", 0x42564B46, 1, 5, 7, len(payload))
open(f"{out}/block_file/block.kvb", "wb").write(head + payload + struct.pack("<Q", 0))
open(f"{out}/safetensors/tiny.safetensors", "wb").write(struct.pack("<Q", len(h)) + h + bytes(range(22)))
PY
[[ -f "$assets/stories260K.gguf" ]] && cp "$assets/stories260K.gguf" "$seeds/gguf/"
[[ -f "$assets/hf/stories260K/model.safetensors" ]] && cp "$assets/hf/stories260K/model.safetensors" "$seeds/safetensors/"
# Templates: a small one exercising most constructs, plus the real chat templates when present.
cat > "$seeds/template/mini.jinja" <<'JINJA'
{%- set ns = namespace(n=0) -%}
{%- macro m(x, y='d') -%}{{ x ~ y }}{%- endmacro -%}
{%- for msg in messages if msg.role != 'tool' -%}
  {%- set ns.n = ns.n + loop.index0 -%}
  {{- bos_token if loop.first else '' }}{{ msg.role | upper }}: {{ msg.content | trim if msg.content is string else msg | tojson(indent=2) }}
  {%- if not loop.last %}{% continue %}{% endif -%}
{%- else -%}{{ raise_exception('empty') }}{%- endfor -%}
{{ m(ns.n) }}{{ tools | map(attribute='function.name') | join(', ') }}{{ 'a,b'.split(',')[::-1] }}{{ strftime_now('%Y') }}
{%- if add_generation_prompt %}{% generation %}<|assistant|>{% endgeneration %}{% endif %}
JINJA
if [[ -d "$assets/chat-templates" ]]; then
  cp "$assets"/chat-templates/*.jinja "$seeds/template/" 2>/dev/null || true
fi

# Tokenizer inputs: text with special-token markup, multi-byte UTF-8 and invalid bytes.
printf 'Hello <s> world </s> \xc3\xa9\xe2\x96\x81 \xff\xfe 123 can'"'"'t' >"$seeds/tokenizer/mixed.txt"
# OpenAI request bodies: a completion and a chat with most fields set.
cat >"$seeds/openai_request/completion.json" <<'JSON'
{"model":"m","prompt":["a",[1,2,3]],"max_tokens":8,"n":2,"best_of":3,"temperature":0.7,"top_p":0.9,"top_k":5,"min_p":0.1,"seed":3,"stop":["x","yz"],"presence_penalty":0.5,"frequency_penalty":-0.5,"logprobs":2,"echo":false,"stream":false}
JSON
cat >"$seeds/openai_request/chat.json" <<'JSON'
{"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":"yo"}],"stream":true,"stream_options":{"include_usage":true},"logprobs":true,"top_logprobs":3,"max_completion_tokens":5,"stop":"\n"}
JSON
# Constraint compilers: llama.cpp's example grammars, a few regexes and schemas.
cp "$root"/tests/constraint/gbnf/*.gbnf "$seeds/gbnf/"
# Token terminals (fuzz/constraint_fuzz_util.h's vocabulary has <think>, </think> and <|c|>).
printf 'root ::= <think> (!</think>)* </think> ("a" | <[30]> | !<[2]>)+ <|c|>\n' >"$seeds/gbnf/tokens.gbnf"
printf '\x00^[a-z]+(\\d{2,3}|x)?$' >"$seeds/regex/plain"
printf '\x03\\w+@[^"\\\\]{1,4}' >"$seeds/regex/json"
cat >"$seeds/json_schema/object.json" <<'JSON'
{"type":"object","properties":{"a":{"type":"integer","minimum":-3,"exclusiveMaximum":70},"b":{"type":["string","null"],"maxLength":4},
 "c":{"type":"array","prefixItems":[{"const":[1,{"x":2}]}],"items":{"enum":["u","v"]},"maxItems":3},"d":{"type":"string","format":"date-time"},
 "e":{"anyOf":[{"$ref":"#/$defs/n"},{"type":"number","minimum":0}]}},"required":["a"],"additionalProperties":{"type":"boolean"},
 "$defs":{"n":{"type":"object","properties":{"next":{"$ref":"#/$defs/n"}}}}}
JSON
cat >"$seeds/openai_request/structured.json" <<'JSON'
{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"},"strict":true}}}
JSON
# Tool-call outputs: the first byte picks the format (byte % 5) and the streamed piece size.
printf '\x00Sure.\n<tool_call>\n{"name": "f", "arguments": {"a": [1, "}"]}}\n</tool_call>' >"$seeds/tool_call/hermes"
printf '\x01{"name": "f", "parameters": {"q": 1.5e3}}; <|python_tag|>{"name": "g", "parameters": {}}' >"$seeds/tool_call/llama3"
printf '\x02[TOOL_CALLS] [{"name": "f", "arguments": {"x": null}, "id": "abcdefghi"}]' >"$seeds/tool_call/mistral3"
printf '\x03[TOOL_CALLS]f[CALL_ID]123456789[ARGS]{"a": "[ARGS]"}[TOOL_CALLS]g[ARGS]{}' >"$seeds/tool_call/mistral11"
printf '\x04{"tool_calls": [{"name": "f", "arguments": "{\\"s\\": true}"}]}' >"$seeds/tool_call/generic"
printf '\x05Ok <tool_call>\n<function=f>\n<parameter=a>\nx y\n</parameter>\n<parameter=n>\n[1]\n</parameter>\n</function>\n</tool_call>' >"$seeds/tool_call/qwen3coder"
printf '\x06<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{"a": 1}<|call|>' >"$seeds/tool_call/harmony"
printf '\x07<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{"a": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>' >"$seeds/tool_call/deepseek_r1"
printf '\x08x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{"a": 1}<｜tool▁call▁end｜><｜tool▁calls▁end｜>' >"$seeds/tool_call/deepseek_v31"
printf '\x09Hi <function=f>{"a": 1}</function><function=g>{}</function>' >"$seeds/tool_call/functionary31"
printf '\x0aall\nLooking.>>>f\n{"a": 1}>>>g\n{}' >"$seeds/tool_call/functionary32"
printf '\x0b<|START_THINKING|>plan<|END_THINKING|><|START_ACTION|>[{"tool_call_id": "0", "tool_name": "f", "parameters": {}}]<|END_ACTION|>' >"$seeds/tool_call/command_r7b"
printf '\x0c<|tool_call|>[{"name": "f", "arguments": {"a": 1}}]' >"$seeds/tool_call/granite"
printf '\x0dOk\n\n<｜DSML｜function_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="a" string="false">[1]</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>' >"$seeds/tool_call/dsml"
cat >"$seeds/openai_request/tools.json" <<'JSON'
{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"c","content":"ok"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}},"parallel_tool_calls":false,"chat_template_kwargs":{"enable_thinking":false}}
JSON
targets=(gguf safetensors template openai_request gbnf regex json_schema tool_call block_file)
# The tokenizer target loads real vocabularies; without the assets it cannot run.
if [[ -f "$assets/llama.cpp-vocab/ggml-vocab-llama-spm.gguf" && -f "$assets/llama.cpp-vocab/ggml-vocab-gpt-2.gguf" ]]; then
  export FERRY_ASSETS="$assets"
  targets+=(tokenizer)
else
  echo "== tokenizer_fuzz skipped: vocabularies not found under $assets (set FERRY_ASSETS)"
fi

status=0
for target in "${targets[@]}"; do
  seconds="$fuzz_seconds"
  # The block file parser is small: a few seconds cover it (CI time is tight).
  if [[ "$target" == block_file && "$seconds" -gt 5 ]]; then seconds=5; fi
  echo "== ${target}_fuzz for ${seconds}s"
  # max_len keeps the big seeds (truncated) from slowing every iteration down.
  if ! "$build/fuzz/${target}_fuzz" "$corpus/$target" "$seeds/$target" \
      -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
      -artifact_prefix="$artifacts/${target}-" -print_final_stats=1; then
    echo "!! ${target}_fuzz found a crash; reproducer in $artifacts/" >&2
    status=1
  fi
done
exit "$status"
