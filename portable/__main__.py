"""python -m portable"""

from portable.cli import main

main()
