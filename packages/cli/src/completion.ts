import type { Command } from 'commander';

const BIN = 'hostplane-cli';

const names = (cmd: Command) => cmd.commands.map((c) => c.name());
const flags = (cmd: Command) =>
  cmd.options.flatMap((o) => [o.long, o.short].filter((f): f is string => Boolean(f))).concat('--help');
const word = (s: string) => s.replace(/[^A-Za-z0-9_,.-]/g, '');
const quote = (s: string) => s.replace(/'/g, "'\\''").replace(/:/g, '\\:');

/**
 * A completion script generated from the command tree itself (so it never lists a command the CLI
 * does not have): commands, subcommands and options.
 */
export function completionScript(program: Command, shell: 'bash' | 'zsh'): string {
  return shell === 'bash' ? bash(program) : zsh(program);
}

function bash(program: Command): string {
  const globals = flags(program).join(' ');
  const cases = program.commands
    .map((cmd) => {
      const subs = cmd.commands
        .map((sub) => `          ${word(sub.name())}) opts="${flags(sub).join(' ')}" ;;`)
        .join('\n');
      return `      ${word(cmd.name())})
        if [ "$COMP_CWORD" -eq 2 ] && [ -n "${names(cmd).join(' ')}" ]; then
          COMPREPLY=($(compgen -W "${names(cmd).join(' ')}" -- "$cur")); return
        fi
        opts="${flags(cmd).join(' ')}"
        case "\${COMP_WORDS[2]}" in
${subs}
        esac ;;`;
    })
    .join('\n');
  return `# bash completion for ${BIN}: add to ~/.bashrc with  source <(${BIN} completion bash)
_hostplane_cli() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" opts=""
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${names(program).join(' ')} ${globals}" -- "$cur")); return
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
  esac
  if [[ "$cur" == -* ]]; then COMPREPLY=($(compgen -W "$opts ${globals}" -- "$cur")); fi
}
complete -o default -F _hostplane_cli ${BIN}
`;
}

function zsh(program: Command): string {
  const described = (cmds: readonly Command[]) =>
    cmds.map((c) => `'${quote(word(c.name()))}:${quote(c.description())}'`).join(' ');
  const cases = program.commands
    .map((cmd) => {
      const subs = cmd.commands
        .map((sub) => `        ${word(sub.name())}) opts=(${flags(sub).join(' ')}) ;;`)
        .join('\n');
      return `    ${word(cmd.name())})
      if (( CURRENT == 3 )) && (( \${#\${:-${names(cmd).join(' ')}}} )); then
        cmds=(${described(cmd.commands)}); _describe 'subcommand' cmds; return
      fi
      opts=(${flags(cmd).join(' ')})
      case $words[3] in
${subs}
      esac ;;`;
    })
    .join('\n');
  return `#compdef ${BIN}
# zsh completion for ${BIN}: save as _${BIN} in a directory of $fpath, or  source <(${BIN} completion zsh)
_hostplane_cli() {
  local -a cmds opts
  if (( CURRENT == 2 )); then
    cmds=(${described(program.commands)}); _describe 'command' cmds; return
  fi
  case $words[2] in
${cases}
  esac
  if [[ $PREFIX == -* ]]; then compadd -- $opts ${flags(program).join(' ')}; else _files; fi
}
if [[ $zsh_eval_context[-1] == loadautofunc ]]; then _hostplane_cli "$@"; else compdef _hostplane_cli ${BIN}; fi
`;
}
