"""python -m portable"""

from portable.cli import console

console()
