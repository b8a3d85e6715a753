import CoreCommands
import Formatting
import StepGateDaemon

/// The manual page and the shell completions, generated from the command definitions, so they
/// list exactly the subcommands and options `stepgate` accepts. The repository ships their
/// output (`docs/man/stepgate.1`, `completions/`); a test checks the copies are current.
enum Documentation {
    /// The commands as the man page and the completions list them: every subcommand, then
    /// `help`.
    static var commands: [CommandConfiguration] { StepGate.commands.map { $0.type.configuration } }

    // MARK: - Manual page

    /// The manual page, in the man(7) macros.
    static func manPage() -> String {
        var page = """
            .TH STEPGATE 1 "" "StepGate \(StepGate.version)" "User Commands"
            .SH NAME
            stepgate \\- walk to unlock: count steps from an accelerometer and lift shields once a step goal is met
            .SH SYNOPSIS
            .B stepgate
            .I subcommand
            .RI [ options ]
            .br
            .B stepgate help
            .RI [ subcommand " | " \\-\\-man ]
            .br
            .B stepgate
            .RB [ \\-\\-version " | " \\-\\-help ]
            .SH DESCRIPTION

            """
        page += paragraph(StepGate.overview)
        page +=
            ".PP\n" + paragraph("Every subcommand has --help; 'stepgate help SUBCOMMAND' prints the same.")
        page += ".SH COMMANDS\n"
        for c in commands {
            page += ".SS \(escape(c.commandName))\n"
            page += ".B \(escape(StepGate.usage(for: c)))\n.PP\n"
            page += paragraph(c.abstract)
            if !c.discussion.isEmpty { page += ".PP\n" + paragraph(c.discussion) }
            for argument in c.arguments {
                page += ".TP\n.I \(escape(argument.name))\n" + paragraph(argument.help)
            }
            for option in c.options {
                page += ".TP\n" + optionLine(option) + paragraph(option.help)
            }
        }
        page += """
            .SH EXIT STATUS
            .TP
            .B 0
            Success.
            .TP
            .B 1
            Something failed; the message on standard error says what and where.
            .TP
            .B 64
            A usage error: an unknown subcommand or option, or a missing or invalid argument.
            .TP
            .B 126
            .B stepgate exec
            did not start a shielded program, or could not reach the daemon (it fails closed).
            .SH FILES
            .TP
            .I /etc/stepgate/config.json
            The daemon's configuration (see
            .BR "stepgate daemon \\-\\-check" ).
            .TP
            .I /var/lib/stepgate
            The daemon's state: the policy state and the shields' memory.
            .TP
            .I /run/stepgate/control.sock
            The control socket that status, lock, skip, unlock, reload and exec talk to.
            .SH SEE ALSO
            The README and docs/*.md of the StepGate repository: the detector, tuning, the unlock
            policy and the daemon.

            """
        return page
    }

    // MARK: - Markdown reference

    /// The command reference as Markdown (`docs/commands.md`): every subcommand's usage,
    /// description, arguments and options, as its `--help` gives them.
    static func markdownReference() -> String {
        var page = """
            # Command reference

            Generated from the command definitions by `stepgate help --markdown` (`bash \
            scripts/man-and-completions.sh` writes this file; a test fails when it is out of date).
            `stepgate help SUBCOMMAND` and `man stepgate` say the same. Exit status: 0 on success, 1 when \
            something failed (the message says what and where, on standard error), 64 for a usage \
            error, 126 when `stepgate exec` did not start a shielded program.


            """
        page += "```\n$ stepgate --help\n\(StepGate.rootHelp)\n```\n\n"
        page += commands.map { "[\($0.commandName)](#\($0.commandName))" }.joined(separator: " · ") + "\n"
        for c in commands {
            page += "\n## \(c.commandName)\n\n"
            page += "```\n\(StepGate.usage(for: c))\n```\n\n"
            page += markdownText(c.abstract) + "\n"
            if !c.discussion.isEmpty { page += "\n" + markdownText(c.discussion) + "\n" }
            if !c.arguments.isEmpty || !c.options.isEmpty {
                page += "\n| argument or option | meaning |\n|---|---|\n"
                for argument in c.arguments {
                    page += "| `\(argument.name)` | \(markdownCell(argument.help)) |\n"
                }
                for option in c.options {
                    var names = "`--\(option.name)\(option.valueName.map { " <\($0)>" } ?? "")`"
                    if let short = option.shortName { names = "`-\(short)`, " + names }
                    page += "| \(names) | \(markdownCell(option.help)) |\n"
                }
            }
        }
        return page
    }

    /// Help text as Markdown: its lines joined into one paragraph each (blank lines kept).
    private static func markdownText(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).joined(separator: "\n")
    }

    /// Help text in a table cell: one line, `|` escaped.
    private static func markdownCell(_ text: String) -> String {
        var cell = ""
        for character in text {
            cell += character.isNewline ? " " : character == "|" ? "\\|" : String(character)
        }
        return cell
    }

    /// `.B \-\-output " " \fIfile\fR` style: the option in bold, its value in italics.
    private static func optionLine(_ option: OptionSpec) -> String {
        var names = "\\fB\\-\\-\(escape(option.name))\\fR"
        if let short = option.shortName { names = "\\fB\\-\(escape(String(short)))\\fR, " + names }
        if let value = option.valueName { names += " \\fI\(escape(value))\\fR" }
        return names + "\n"
    }

    /// Text as filled lines: escaped, and never starting with a control character.
    private static func paragraph(_ text: String) -> String {
        var lines = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: true) {
            var escaped = escape(String(line))
            if escaped.hasPrefix(".") || escaped.hasPrefix("'") { escaped = "\\&" + escaped }
            lines += escaped + "\n"
        }
        return lines
    }

    /// Backslashes and hyphens escaped for troff.
    private static func escape(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "\\": out += "\\e"
            case "-": out += "\\-"
            default: out.append(character)
            }
        }
        return out
    }

    // MARK: - Completions

    /// A shell-quoted word list, for bash.
    private static func words(_ list: [String]) -> String { list.joined(separator: " ") }

    private static func optionWords(_ c: CommandConfiguration) -> [String] {
        c.options.flatMap { option in
            ["--\(option.name)"] + (option.shortName.map { ["-\($0)"] } ?? [])
        } + ["--help"]
    }

    private static func valueOptionWords(_ c: CommandConfiguration) -> [String] {
        c.options.filter { $0.valueName != nil }.flatMap { option in
            ["--\(option.name)"] + (option.shortName.map { ["-\($0)"] } ?? [])
        }
    }

    static let shells = ["bash", "zsh", "fish"]

    /// The completion script for `shell` (one of ``shells``).
    static func completion(for shell: String) -> String? {
        switch shell {
        case "bash": bashCompletion()
        case "zsh": zshCompletion()
        case "fish": fishCompletion()
        default: nil
        }
    }

    static func bashCompletion() -> String {
        var script = """
            # bash completion for stepgate; generated by 'stepgate completions bash'.
            # Install: copy to /usr/share/bash-completion/completions/stepgate, or source it.
            _stepgate() {
                local cur="${COMP_WORDS[COMP_CWORD]}"
                local prev="${COMP_WORDS[COMP_CWORD-1]}"
                local commands="\(words(commands.map(\.commandName)) + " help")"
                if [ "$COMP_CWORD" -eq 1 ]; then
                    COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
                    return
                fi
                local options="" values=""
                case "${COMP_WORDS[1]}" in

            """
        for c in commands {
            script += """
                        \(c.commandName))
                            options="\(words(optionWords(c)))"
                            values="\(words(valueOptionWords(c)))"
                            ;;

                """
        }
        script += """
                    help)
                        COMPREPLY=($(compgen -W "$commands --man" -- "$cur"))
                        return
                        ;;
                    *) return ;;
                esac
                if [ "${COMP_WORDS[1]}" = completions ] && [[ "$cur" != -* ]]; then
                    COMPREPLY=($(compgen -W "\(words(shells))" -- "$cur"))
                    return
                fi
                case " $values " in
                    *" $prev "*)
                        COMPREPLY=($(compgen -f -- "$cur"))
                        return
                        ;;
                esac
                if [[ "$cur" == -* ]]; then
                    COMPREPLY=($(compgen -W "$options" -- "$cur"))
                else
                    COMPREPLY=($(compgen -f -- "$cur"))
                fi
            }
            complete -o filenames -F _stepgate stepgate

            """
        return script
    }

    /// Text inside a zsh single-quoted `_arguments` spec: `'` closed and reopened, and the
    /// characters the spec gives meaning to (`[`, `]`, `:`) escaped.
    private static func zshText(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "'": out += "'\\''"
            case "[", "]", ":", "\\": out += "\\" + String(character)
            default: out.append(character)
            }
        }
        return out
    }

    static func zshCompletion() -> String {
        var script = """
            #compdef stepgate
            # zsh completion for stepgate; generated by 'stepgate completions zsh'.
            # Install: copy to a folder on $fpath as _stepgate.
            _stepgate() {
                local -a commands
                commands=(

            """
        for c in commands {
            script += "        '\(zshText(c.commandName)):\(zshText(c.abstract))'\n"
        }
        script += """
                    'help:Show help for a subcommand, or the manual page (--man).'
                )
                if (( CURRENT == 2 )); then
                    _describe -t commands 'stepgate subcommand' commands
                    return
                fi
                case $words[2] in

            """
        for c in commands {
            var specs: [String] = []
            for option in c.options {
                let value = option.valueName.map { ":\(zshText($0)):_files" } ?? ""
                let names =
                    option.shortName.map { "{-\($0),--\(option.name)}" } ?? "--\(option.name)"
                let help = "[\(zshText(option.help))]"
                specs.append(
                    option.shortName == nil ? "'\(names)\(help)\(value)'" : "\(names)'\(help)\(value)'")
            }
            specs.append("'--help[Show help information.]'")
            if c.commandName == "completions" {
                specs.append("':shell:(\(shells.joined(separator: " ")))'")
            } else if !c.arguments.isEmpty {
                specs.append("'*:argument:_files'")
            }
            script += "        \(c.commandName))\n"
            script += "            _arguments -s \\\n"
            script += specs.map { "                \($0)" }.joined(separator: " \\\n") + "\n"
            script += "            ;;\n"
        }
        script += """
                    help)
                        _arguments '--man[Print the manual page.]' ':subcommand:(\(commands.map(\.commandName).joined(separator: " ")))'
                        ;;
                esac
            }
            _stepgate "$@"

            """
        return script
    }

    /// Text inside fish single quotes.
    private static func fishText(_ text: String) -> String {
        text.replacingAll("\\", with: "\\\\").replacingAll("'", with: "\\'")
    }

    static func fishCompletion() -> String {
        let names = (commands.map(\.commandName) + ["help"]).joined(separator: " ")
        var script = """
            # fish completion for stepgate; generated by 'stepgate completions fish'.
            # Install: copy to ~/.config/fish/completions/stepgate.fish.
            complete -c stepgate -f
            complete -c stepgate -n '__fish_use_subcommand' -l version -d 'Show the version.'
            complete -c stepgate -n '__fish_use_subcommand' -s h -l help -d 'Show help information.'
            complete -c stepgate -n '__fish_use_subcommand' -a help -d 'Show help for a subcommand, or the manual page.'
            complete -c stepgate -n '__fish_seen_subcommand_from help' -a '\(names)'
            complete -c stepgate -n '__fish_seen_subcommand_from help' -l man -d 'Print the manual page.'

            """
        for c in commands {
            let seen = "'__fish_seen_subcommand_from \(c.commandName)'"
            script +=
                "complete -c stepgate -n '__fish_use_subcommand' -a \(c.commandName) -d '\(fishText(c.abstract))'\n"
            for option in c.options {
                var line = "complete -c stepgate -n \(seen) -l \(option.name)"
                if let short = option.shortName { line += " -s \(short)" }
                if option.valueName != nil { line += " -r -F" }
                line += " -d '\(fishText(option.help))'"
                script += line + "\n"
            }
            if c.commandName == "completions" {
                script += "complete -c stepgate -n \(seen) -a '\(shells.joined(separator: " "))'\n"
            } else if !c.arguments.isEmpty {
                script += "complete -c stepgate -n \(seen) -F\n"
            }
        }
        return script
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for character in self {
            if character == target { out += replacement } else { out.append(character) }
        }
        return out
    }
}

/// `stepgate completions SHELL`: prints the completion script for a shell.
struct Completions: SynchronousCommand {
    static let configuration = CommandConfiguration(
        commandName: "completions",
        abstract: "Print the shell completion script for bash, zsh or fish.",
        discussion: """
            Generated from the command definitions. For bash: stepgate completions bash > \
            /usr/share/bash-completion/completions/stepgate (or source it); for zsh: a file \
            _stepgate on $fpath; for fish: ~/.config/fish/completions/stepgate.fish. The manual page \
            is 'stepgate help --man'.
            """,
        arguments: [ArgumentHelp("<shell>", help: "bash, zsh or fish.")]
    )

    var shell: String

    init(arguments: ParsedArguments) throws(UsageError) {
        guard arguments.positionals.count == 1, let shell = arguments.positionals.first else {
            throw UsageError("expected exactly one '<shell>': bash, zsh or fish")
        }
        guard Documentation.shells.contains(shell) else {
            throw UsageError("invalid value '\(shell)' for '<shell>': expected bash, zsh or fish")
        }
        self.shell = shell
    }

    func runSynchronously() throws {
        print(Documentation.completion(for: shell) ?? "", terminator: "")
    }
}
