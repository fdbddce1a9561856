package main

import (
	"context"
	"fmt"
	"os"
	"strings"
)

// runCompletion prints a shell completion script. The script asks the
// binary itself ("hotlane CMD -h") for a command's flags when a flag is
// being completed, so it never falls behind the flags.
func runCompletion(_ context.Context, args []string) int {
	if len(args) != 1 || args[0] != "bash" {
		if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
			fmt.Print(completionUsage)
			return exitOK
		}
		fmt.Fprintf(os.Stderr, "hotlane completion: want one shell, bash (got %q); run 'hotlane completion -h'\n", strings.Join(args, " "))
		return exitError
	}
	fmt.Print(bashCompletion())
	return exitOK
}

const completionUsage = `Usage: hotlane completion bash

Prints a bash completion script for hotlane: commands, probes, and each
command's flags as its -h lists them. Load it in this shell with

  source <(hotlane completion bash)

or for every shell with

  hotlane completion bash > /etc/bash_completion.d/hotlane
`

// bashCompletion is the script: the commands and the words that may
// follow one (probe's probes, bench's hooks) are fixed here; flags are
// read from the binary's help at completion time.
func bashCompletion() string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	var probeNames []string
	for _, p := range probes() {
		probeNames = append(probeNames, p.name)
	}
	return fmt.Sprintf(`# bash completion for hotlane: source <(hotlane completion bash)
_hotlane() {
	local cur=${COMP_WORDS[COMP_CWORD]} words=() i
	for ((i = 1; i < COMP_CWORD; i++)); do
		[[ ${COMP_WORDS[i]} == -* ]] && break
		words+=("${COMP_WORDS[i]}")
	done
	if [[ $cur != -* ]]; then
		case "${#words[@]}:${words[0]}" in
		0:) COMPREPLY=($(compgen -W "%s --help --version" -- "$cur")); return ;;
		1:probe) COMPREPLY=($(compgen -W "%s" -- "$cur")); return ;;
		1:bench) COMPREPLY=($(compgen -W "hooks" -- "$cur")) ;;
		esac
		((${#COMPREPLY[@]})) || COMPREPLY=($(compgen -f -- "$cur"))
		return
	fi
	local flags
	flags=$("${COMP_WORDS[0]}" "${words[@]}" -h 2>/dev/null | sed -nE 's/^  -([a-zA-Z]), (--[a-zA-Z0-9-]+).*/-\1 \2/p; t; s/^  (--?[a-zA-Z0-9-]+).*/\1/p')
	COMPREPLY=($(compgen -W "$flags --help" -- "$cur"))
}
complete -F _hotlane hotlane
`, strings.Join(names, " "), strings.Join(probeNames, " "))
}
