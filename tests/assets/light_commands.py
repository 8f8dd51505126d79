"""A script that runs tunelab commands in one fresh process and says which heavy modules each
left loaded: a refusal that needs no model must come back before torch is imported.

    subprocess.run([sys.executable, "-c", LIGHT_COMMANDS, json.dumps([argv, ...])])

prints, last, a JSON list of {"argv", "code", "heavy"}, one per command, in order."""

LIGHT_COMMANDS = """
import json, sys
from tunelab.cli import main
HEAVY = ("torch", "transformers", "peft")
out = []
for argv in json.loads(sys.argv[1]):
    try:
        code = main(argv)
    except SystemExit as exit:
        code = exit.code
    out.append({"argv": argv, "code": code, "heavy": [m for m in HEAVY if m in sys.modules]})
print(json.dumps(out))
"""
