/**
 * The public API as the TypeScript compiler sees it: what each entry point of package.json "exports" exports,
 * the public members of its classes, and the options each callable takes. test/api-docs.test.ts holds it
 * against docs/api.md.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/** A function, or a public method of an exported class: it needs an entry of its own. */
export interface Callable {
  /** `connect`, or `Client.enqueue`. */
  readonly label: string;
  /** The name its entry shows: `connect`, `enqueue`. */
  readonly name: string;
}

/** A field of an object a callable takes (an option, a patch's field): named where those callables are. */
export interface OptionField {
  /** `WorkerOptions.concurrency`. */
  readonly label: string;
  readonly name: string;
  /** The callables that take it, by name. */
  readonly takenBy: readonly string[];
}

/** A public property of an exported class (not an error's): named where the class is described. */
export interface ClassProperty {
  readonly label: string;
  readonly className: string;
  readonly name: string;
}

export interface ApiSurface {
  readonly callables: readonly Callable[];
  readonly options: readonly OptionField[];
  readonly classProperties: readonly ClassProperty[];
  /** Exported errors (classes extending Error) and their own public properties. */
  readonly errors: readonly { readonly name: string; readonly properties: readonly string[] }[];
  /** Exported constants, named wherever the reference mentions them. */
  readonly constants: readonly string[];
  /** Exported types whose name ends in `Options`: each must be taken by some callable, so its fields are checked. */
  readonly optionTypes: readonly string[];
}

/** The source files behind package.json's "exports" (./dist/x.d.ts is built from src/x.ts). */
export function entryPoints(root: string): string[] {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
    exports: Record<string, string | { types?: string }>;
  };
  return Object.values(pkg.exports)
    .map((target) => (typeof target === 'string' ? undefined : target.types))
    .filter((types): types is string => types !== undefined)
    .map((types) => join(root, types.replace(/^\.\/dist\//, 'src/').replace(/\.d\.ts$/, '.ts')));
}

export function readApiSurface(root: string): ApiSurface {
  const files = entryPoints(root);
  // The project's own compiler options, so the types read are the ones `npm run typecheck` checks.
  const config = ts.getParsedCommandLineOfConfigFile(
    join(root, 'tsconfig.json'),
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (diagnostic) => {
        throw new Error(ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n'));
      },
    },
  );
  const program = ts.createProgram(files, config?.options ?? { strict: true });
  const checker = program.getTypeChecker();
  const srcDir = `${join(root, 'src')}/`;
  const callables: Callable[] = [];
  const classProperties: ClassProperty[] = [];
  const errors: { name: string; properties: string[] }[] = [];
  const constants: string[] = [];
  const optionTypes: string[] = [];
  // Each field once, however many callables take it (BatchItem inherits EnqueueOptions' fields).
  const fields = new Map<ts.Node | string, { label: string; name: string; takenBy: Set<string> }>();

  const takeParameters = (name: string, signature: ts.SignatureDeclaration): void => {
    for (const parameter of signature.parameters) {
      for (const type of objectTypes(checker, checker.getTypeAtLocation(parameter))) {
        const typeName = checker.typeToString(type);
        for (const property of checker.getPropertiesOfType(type)) {
          if (!declaredIn(srcDir, property)) continue;
          const key = property.declarations?.[0] ?? `${typeName}.${property.name}`;
          const label = `${declaringName(property) ?? typeName}.${property.name}`;
          const field = fields.get(key) ?? { label, name: property.name, takenBy: new Set() };
          field.takenBy.add(name);
          fields.set(key, field);
        }
      }
    }
  };

  for (const file of files) {
    const source = program.getSourceFile(file);
    const module = source === undefined ? undefined : checker.getSymbolAtLocation(source);
    if (module === undefined) throw new Error(`cannot read the exports of ${file}`);
    for (const exported of checker.getExportsOfModule(module)) {
      const symbol = exported.flags & ts.SymbolFlags.Alias ? checker.getAliasedSymbol(exported) : exported;
      const name = exported.name;
      if (/Options$/.test(name) && symbol.flags & (ts.SymbolFlags.Interface | ts.SymbolFlags.TypeAlias)) {
        optionTypes.push(name);
      }
      const declaration = symbol.declarations?.[0];
      if (declaration === undefined) continue;
      if (ts.isFunctionDeclaration(declaration)) {
        callables.push({ label: name, name });
        takeParameters(name, declaration);
      } else if (ts.isClassDeclaration(declaration)) {
        const members = declaration.members.filter(isPublicMember);
        if (extendsError(checker, declaration)) {
          errors.push({ name, properties: members.flatMap((member) => memberName(member) ?? []) });
          continue;
        }
        for (const member of members) {
          const memberText = memberName(member);
          if (memberText === null) continue;
          if (ts.isMethodDeclaration(member)) {
            callables.push({ label: `${name}.${memberText}`, name: memberText });
            takeParameters(memberText, member);
          } else {
            classProperties.push({ label: `${name}.${memberText}`, className: name, name: memberText });
          }
        }
      } else if (ts.isVariableDeclaration(declaration)) {
        constants.push(name);
      }
    }
  }
  const options = [...fields.values()].map(({ label, name, takenBy }) => ({ label, name, takenBy: [...takenBy] }));
  return { callables, options, classProperties, errors, constants, optionTypes };
}

/** The object types a parameter of this type may be given (its union's members, an array's elements). */
function objectTypes(checker: ts.TypeChecker, type: ts.Type): ts.Type[] {
  if (type.isUnion()) return type.types.flatMap((member) => objectTypes(checker, member));
  if (checker.isArrayType(type))
    return checker.getTypeArguments(type as ts.TypeReference).flatMap((t) => objectTypes(checker, t));
  if (!(type.flags & ts.TypeFlags.Object) || type.getCallSignatures().length > 0) return [];
  // A Client or a Date is not an options object; fields declared outside src (AbortSignal's) are not kvmq's.
  if ((type.getSymbol()?.flags ?? 0) & ts.SymbolFlags.Class) return [];
  return [type];
}

function isPublicMember(member: ts.ClassElement): boolean {
  if (ts.isConstructorDeclaration(member) || ts.isClassStaticBlockDeclaration(member)) return false;
  if (member.name === undefined || ts.isPrivateIdentifier(member.name) || ts.isComputedPropertyName(member.name)) {
    return false;
  }
  const modifiers = ts.getCombinedModifierFlags(member);
  if (modifiers & (ts.ModifierFlags.Private | ts.ModifierFlags.Protected)) return false;
  return !ts.getJSDocTags(member).some((tag) => tag.tagName.text === 'internal');
}

function memberName(member: ts.ClassElement): string | null {
  return member.name !== undefined && ts.isIdentifier(member.name) ? member.name.text : null;
}

function extendsError(checker: ts.TypeChecker, declaration: ts.ClassDeclaration): boolean {
  for (let type: ts.Type | undefined = checker.getTypeAtLocation(declaration); type !== undefined;) {
    if (type.getSymbol()?.name === 'Error') return true;
    type = checker.getBaseTypes(type as ts.InterfaceType)[0];
  }
  return false;
}

function declaredIn(directory: string, symbol: ts.Symbol): boolean {
  return (symbol.declarations ?? []).some((node) => node.getSourceFile().fileName.startsWith(directory));
}

/** The interface that declares a field (QueueConfig for a field of Partial<QueueConfig>). */
function declaringName(property: ts.Symbol): string | undefined {
  const parent = property.declarations?.[0]?.parent;
  return parent !== undefined && ts.isInterfaceDeclaration(parent) ? parent.name.text : undefined;
}
