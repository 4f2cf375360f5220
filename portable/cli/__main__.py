"""python -m portable.cli"""

from portable.cli import console

console()
